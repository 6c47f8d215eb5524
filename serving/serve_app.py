"""Ray Serve app: any engine as a deployment, an OpenAI-compatible HTTP front, and a client.

- ``EngineDeployment`` wraps an engine built from a config dict. Engines that are not thread-safe
  (no ``thread_safe = True`` attribute) are called under a lock; calls run off the event loop so
  health checks still answer during a long batch. Concurrent single requests (HTTP) are batched
  into one engine call.
- ``OpenAIIngress`` serves ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /tokenize``
  (vLLM's shape) and ``GET /health``.
- ``deploy`` / ``ServeEngine`` / ``shutdown`` are what ``llmrec serve`` and the runner call.
  ``ServeEngine`` implements the Engine protocol through a ``DeploymentHandle``; engine errors
  (``ContextOverflow``, ``EngineError``) arrive as themselves, as if the engine were local.
"""

# No `from __future__ import annotations`: FastAPI must see the real `HTTPRequest` type.
import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid

from fastapi import FastAPI, Request as HTTPRequest
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from ray import serve
from ray.serve.handle import DeploymentHandle

from llmrec.errors import ConfigError, ContextOverflow, EngineError, LlmrecError
from llmrec.serving.engine import EngineConfig, build_engine, engine_config
from llmrec.types import Constraint, Request, Result, SamplingParams

log = logging.getLogger(__name__)

ENGINE_DEPLOYMENT = "EngineDeployment"
HEALTH_TIMEOUT_S = 120.0


def _error_payload(e: Exception) -> dict:
    if isinstance(e, ContextOverflow):
        return {"kind": "context_overflow", "prompt_tokens": e.prompt_tokens, "context_limit": e.context_limit,
                "message": str(e)}
    return {"kind": "engine", "message": f"{type(e).__name__}: {e}"}


def _raise_payload(err: dict):
    if err["kind"] == "context_overflow":
        raise ContextOverflow(err["prompt_tokens"], err["context_limit"])
    raise EngineError(err["message"])


@serve.deployment(max_ongoing_requests=64, max_constructor_retry_count=2)
class EngineDeployment:
    def __init__(self, engine_cfg: EngineConfig):
        self._engine = build_engine(engine_cfg)
        self._engine.start()
        safe = self._engine.thread_safe
        self._lock = contextlib.nullcontext() if safe else threading.Lock()
        log.info("engine %s ready", self._engine.config.type)

    def _call(self, fn, *args):
        with self._lock:
            return fn(*args)

    async def _run(self, fn, *args) -> dict:
        """Run an engine call in a thread; errors come back as data so the caller can re-raise them."""
        try:
            return {"ok": await asyncio.to_thread(self._call, fn, *args)}
        except LlmrecError as e:
            return {"error": _error_payload(e)}

    async def generate(self, requests: list[dict]) -> dict:
        reqs = [Request.model_validate(r) for r in requests]
        out = await self._run(self._engine.generate, reqs)
        if "ok" in out:
            out["ok"] = [r.model_dump(mode="json") for r in out["ok"]]
        return out

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.005)
    async def generate_one(self, requests: list[dict]) -> list[dict]:
        """One engine call for concurrent single requests; on failure, each is retried alone."""
        out = await self.generate(requests)
        if "ok" in out:
            return [{"ok": r} for r in out["ok"]]
        if len(requests) == 1:
            return [out]
        alone = [await self.generate([r]) for r in requests]
        return [{"ok": one["ok"][0]} if "ok" in one else one for one in alone]

    async def count_tokens(self, request: dict) -> dict:
        return await self._run(self._engine.count_tokens, Request.model_validate(request))

    def identity(self) -> dict:
        return self._engine.identity()

    def context_limit(self) -> int | None:
        return getattr(self._engine, "context_limit", None)

    def check_health(self) -> None:
        if not self._engine.check_health():
            raise RuntimeError("engine reports unhealthy")


api = FastAPI(title="llmrec", description="OpenAI-compatible front of an llmrec engine")


def _http_error(status: int, message: str, kind: str = "invalid_request_error", code: str | None = None):
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, status)


def _over_context(req: Request, prompt_tokens: int, limit: int | None):
    """OpenAI's (and vLLM's) 400 for a prompt over the context, from the typed numbers."""
    asked = prompt_tokens + req.sampling.max_tokens
    size = f"is {limit} tokens" if limit is not None else "was exceeded"
    return _http_error(400, f"This model's maximum context length {size}. However, you requested {asked} tokens "
                       f"({prompt_tokens} in the messages, {req.sampling.max_tokens} in the completion).",
                       code="context_length_exceeded")


def chat_request(body: dict) -> Request:
    """An OpenAI chat body → ``Request`` (OpenAI defaults: temperature 1; max_tokens 256 here)."""
    if body.get("stream"):
        raise ValueError("stream=true is not supported")
    if body.get("n", 1) != 1:
        raise ValueError("only n=1 is supported")
    stop = body.get("stop") or []
    given = {k: body[k] for k in ("temperature", "top_p", "seed") if body.get(k) is not None}
    sampling = SamplingParams(**{"temperature": 1.0, "seed": None, **given},
                              max_tokens=body.get("max_completion_tokens") or body.get("max_tokens") or 256,
                              stop=[stop] if isinstance(stop, str) else stop)
    return Request(messages=body.get("messages"), sampling=sampling, constraint=_constraint(body))


def _constraint(body: dict) -> Constraint | None:
    so = body.get("structured_outputs") or {}
    if so.get("choice") is not None:
        return Constraint(choices=so["choice"])
    if so.get("json") is not None:
        schema = so["json"]
        return Constraint(json_schema=json.loads(schema) if isinstance(schema, str) else schema)
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema":
        return Constraint(json_schema=(rf.get("json_schema") or {}).get("schema") or {})
    if rf.get("type") == "json_object":
        return Constraint(json_schema={"type": "object"})
    return None


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256)
@serve.ingress(api)
class OpenAIIngress:
    def __init__(self, engine: DeploymentHandle):
        self._engine = engine
        self._model: str | None = None

    async def _model_name(self) -> str:
        if self._model is None:
            ident = await self._engine.identity.remote()
            self._model = str(ident.get("model") or ident["type"])
        return self._model

    @api.get("/health")
    async def health(self):
        return {"status": "ok", "model": await self._model_name()}

    @api.get("/v1/models")
    async def models(self):
        name = await self._model_name()
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "llmrec"}]}

    async def _parse(self, http: HTTPRequest) -> Request | JSONResponse:
        try:
            body = await http.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            name = await self._model_name()
            if body.get("model") not in (None, name):
                return _http_error(404, f"The model '{body['model']}' does not exist. Served: {name}",
                                   code="model_not_found")
            return chat_request(body)
        except (ValueError, ValidationError) as e:
            return _http_error(400, str(e))

    @api.post("/v1/chat/completions")
    async def chat(self, http: HTTPRequest):
        req = await self._parse(http)
        if isinstance(req, JSONResponse):
            return req
        try:
            out = await self._engine.generate_one.remote(req.model_dump(mode="json"))
        except Exception as e:  # noqa: BLE001 - a dead replica or Ray failure is a server error to the client
            return _http_error(500, f"{type(e).__name__}: {e}", kind="server_error")
        if "error" in out:
            err = out["error"]
            if err["kind"] == "context_overflow":
                return _over_context(req, err["prompt_tokens"], err["context_limit"])
            return _http_error(500, err["message"], kind="server_error")
        res = Result.model_validate(out["ok"])
        if res.finish_reason == "over_context":
            return _over_context(req, res.prompt_tokens, res.context_limit)
        if res.finish_reason == "error":
            return _http_error(500, res.error or "engine error", kind="server_error")
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": await self._model_name(),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": res.text},
                             "finish_reason": res.finish_reason, "logprobs": None}],
                "usage": {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                          "total_tokens": res.prompt_tokens + res.completion_tokens,
                          "prompt_tokens_details": {"cached_tokens": res.cached_prompt_tokens}}}

    @api.post("/tokenize")
    async def tokenize(self, http: HTTPRequest):
        try:
            body = await http.json()
            req = Request(messages=body.get("messages"))
        except (ValueError, ValidationError, AttributeError) as e:
            return _http_error(400, f"expected {{'messages': [...]}}: {e}")
        out = await self._engine.count_tokens.remote(req.model_dump(mode="json"))
        if "error" in out:
            return _http_error(500, out["error"]["message"], kind="server_error")
        return {"count": out["ok"]}


def deploy(engine_cfg: dict | EngineConfig, app_name: str = "llmrec", replicas: int = 1, num_cpus: float = 1,
           num_gpus: float = 0, http: bool = True, host: str = "127.0.0.1", port: int = 8000,
           route_prefix: str = "/") -> None:
    """Run the engine as a Serve app on the already-initialised Ray; returns once it answers. The config is
    validated here, once: the replicas get the validated object."""
    import ray

    if not ray.is_initialized():
        raise ConfigError("deploy() needs a running Ray: call ray.init() first")
    cfg = engine_config(engine_cfg)
    if http:
        serve.start(http_options={"host": host, "port": port})
    engine = EngineDeployment.options(
        num_replicas=replicas, ray_actor_options={"num_cpus": num_cpus, "num_gpus": num_gpus},
    ).bind(cfg)
    app = OpenAIIngress.bind(engine) if http else engine
    serve.run(app, name=app_name, route_prefix=route_prefix if http else None)
    if http:
        _wait_http(f"http://{host}:{port}{route_prefix.rstrip('/')}/health")
    log.info("Serve app '%s' is up (%s engine, %d replica(s))%s", app_name, cfg.type, replicas,
             f" at http://{host}:{port}{route_prefix.rstrip('/')}/v1" if http else "")


def _wait_http(url: str) -> None:
    import httpx

    deadline, last = time.monotonic() + HEALTH_TIMEOUT_S, ""
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError as e:
            last = str(e)
        time.sleep(0.25)
    raise EngineError(f"the Serve app did not answer {url} within {HEALTH_TIMEOUT_S:.0f}s ({last})")


class ServeEngine:
    """The Engine protocol, answered by a deployed ``EngineDeployment`` through its handle."""

    thread_safe = True

    def __init__(self, app_name: str, engine_cfg: EngineConfig, timeout_s: float | None = None):
        self.config = engine_cfg
        self.app_name, self.timeout_s = app_name, timeout_s
        self._handle: DeploymentHandle | None = None
        self._identity: dict | None = None
        self._limit: int | None = None

    def start(self) -> None:
        if self._handle is None:
            self._handle = serve.get_deployment_handle(ENGINE_DEPLOYMENT, app_name=self.app_name)

    def _result(self, response):
        try:
            return response.result(timeout_s=self.timeout_s)
        except Exception as e:  # noqa: BLE001 - any Serve/Ray failure is an engine failure to the caller
            raise EngineError(f"Serve app '{self.app_name}': {type(e).__name__}: {e}") from e

    def generate(self, requests: list[Request]) -> list[Result]:
        self.start()
        out = self._result(self._handle.generate.remote([r.model_dump(mode="json") for r in requests]))
        if "error" in out:
            _raise_payload(out["error"])
        return [Result.model_validate(r) for r in out["ok"]]

    def count_tokens(self, request: Request) -> int:
        self.start()
        out = self._result(self._handle.count_tokens.remote(request.model_dump(mode="json")))
        if "error" in out:
            _raise_payload(out["error"])
        return int(out["ok"])

    def identity(self) -> dict:
        if self._identity is None:
            self.start()
            self._identity = self._result(self._handle.identity.remote())
        return self._identity

    @property
    def context_limit(self) -> int | None:
        """The deployed engine's context (prompt + completion tokens); None: it reports none."""
        if self._limit is None:
            self.start()
            self._limit = self._result(self._handle.context_limit.remote())
        return self._limit

    def check_health(self) -> bool:
        try:
            self._identity = None
            return bool(self.identity())
        except EngineError:
            return False

    def close(self) -> None:
        self._handle = None


def shutdown(app_name: str) -> None:
    """Delete the app; stop Serve when no app is left."""
    serve.delete(app_name)
    if not serve.status().applications:
        serve.shutdown()


def running_apps() -> list[str]:
    """Names of the Serve apps on the connected cluster (none when Serve is not running)."""
    from ray.serve.exceptions import RayServeException

    try:
        return sorted(serve.status().applications)
    except RayServeException:  # Serve is not running on this cluster: no apps
        return []


def remove_apps(names: list[str], reason: str = "") -> list[str]:
    """Delete those of ``names`` that are running; returns the ones deleted."""
    gone = [n for n in names if n in running_apps()]
    for n in gone:
        log.warning("deleting Serve app '%s'%s", n, f" ({reason})" if reason else "")
        serve.delete(n)
    return gone
