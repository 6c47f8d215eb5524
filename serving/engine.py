"""The Engine protocol and its registry.

An engine is one file in ``serving/engines/`` that defines a config class (a
``EngineConfig`` subclass with a ``type`` literal) and an engine class, and registers
both with ``@register_engine``. Heavy imports happen in ``start``; a missing optional
package raises ``MissingDependency`` naming the extra. Caching, retries and Serve
deployment wrap any engine, so no engine re-implements them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, ClassVar, Protocol, runtime_checkable

from pydantic import Field

from llmrec.config import StrictModel, validate
from llmrec.errors import ConfigError
from llmrec.packing import KVCapacity
from llmrec.registry import Registry
from llmrec.types import Request, Result


def path_tail(value) -> str:
    """A model's name without its folders (``google/gemma-3-1b-it`` → ``gemma-3-1b-it``)."""
    return str(value).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


class EngineConfig(StrictModel):
    """Fields every engine has. Subclasses add their own and fix ``type``.

    What the runner reads of any engine's config, declared here with defaults that a subclass overrides:
    ``label`` (what run names and tables call the model), ``gpus_per_replica`` and ``gpu_share`` (placement,
    ``pipelines/runner/placement.py``).

    ``not_in_identity``: the fields left out of the engine's identity (the request cache key, ``config_identity``),
    each with the reason it cannot change an answer or whether a request fails (a thread count, a port, a
    timeout), or the form in which the engine's ``identity()`` gives it instead (a model file by its content
    hash). Every other field is in the identity, so a new field is part of the key unless it is listed here."""

    not_in_identity: ClassVar[dict[str, str]] = {}

    type: str = Field(description="engine name (see `llmrec list`)")
    context_length: int | None = Field(
        None, ge=1, description="prompt+completion token limit; None = the engine's own"
    )

    @property
    def label(self) -> str:
        """What run names and tables call this engine's model (its name without folders); default: the type."""
        return path_tail(self.type)

    @property
    def gpus_per_replica(self) -> int | None:
        """GPUs one replica of the engine needs (None: any count works)."""
        return None

    @property
    def gpu_share(self) -> float | None:
        """Share of each GPU's memory one replica takes (None: not known; the GPU-sharing check skips it)."""
        return None


def config_identity(cfg: EngineConfig, **extra) -> dict:
    """An engine's identity (what its answers depend on; the request cache key): every field of its config but
    those its class lists in ``not_in_identity``, as JSON values, plus ``extra`` (what the engine adds: a model
    file's hash, an adapter's mtime, a field in another form)."""
    unknown = sorted(set(cfg.not_in_identity) - set(type(cfg).model_fields))
    if unknown:
        raise ConfigError(f"{type(cfg).__name__}.not_in_identity names no field of the config: {', '.join(unknown)}")
    return {**cfg.model_dump(mode="json", exclude=set(cfg.not_in_identity)), **extra}


@runtime_checkable
class Engine(Protocol):
    """What callers use: an engine, or a wrapper of one (request cache, engine pool, Serve client).
    ``config``: the validated config."""

    config: EngineConfig

    def start(self) -> None: ...

    def generate(self, requests: list[Request]) -> list[Result]: ...

    def count_tokens(self, request: Request) -> int: ...

    def identity(self) -> dict: ...

    def check_health(self) -> bool: ...

    def close(self) -> None: ...


class EngineBase:
    """Base class of every registered engine: its optional hooks, declared with their defaults.

    ``thread_safe``: False → the Serve deployment serialises calls with a lock (and an engine pool
    actor takes one call at a time). ``remote``: True for a client of a server elsewhere (openai),
    which runs inside its caller instead of in an engine pool (``serving/engine_pool.py``).
    ``context_limit``: prompt + completion tokens the engine takes (None: not known).
    ``deploy_serve(cfg, app_name, replicas, num_cpus, num_gpus) -> client cfg`` and (validated configs both)
    ``serve_client(cfg) -> Engine``: serve mode through the engine's own app (vllm: ``ray.serve.llm``);
    None → llmrec's ``EngineDeployment`` and ``ServeEngine``.

    Planning hooks (callable before ``start``), defaults "unknown": ``kv_capacity()`` (one replica's KV
    budget in tokens, block size, max sequences: planned before start, measured after),
    ``prompt_tokenizer()`` (Request → the prompt's token ids from the model's tokenizer on this
    machine, or None; one with a ``many(requests)`` method counts a list in one call) and
    ``capacity_lines(capacity)`` (how the budget comes about, for ``llmrec plan``).

    ``run_facts()``: what the engine learned while running that bears on the results but that its config
    does not say (openai: the constraint format the server took after rejecting the first); {} by default.
    Unlike ``identity()`` (what the engine is; the request cache key) it may change during a run. The
    runner records it per role in the run directory (``run_facts.json``) and the MLflow ``protocol`` tag.

    ``provenance()``: what produced this engine's outputs beyond its config, for the run's provenance record
    (``RunDir.PROVENANCE``): the engine arguments after defaults were applied (``engine_args``), the versions of the
    libraries it runs on (``packages``), the model's identity (``model``: the sha256 of the weight file(s) loaded, or
    the hub repo and revision), tokenizer and chat-template hashes, the hardware it runs on where that differs from
    the driver's. Called on a started engine where it runs; called unstarted (it must then load nothing heavy) on
    the driver for a role whose engine runs elsewhere. Never a credential or an environment variable's value. The
    default: the config's fields (credentials and URL secrets redacted)."""

    thread_safe: bool = False
    remote: bool = False
    context_limit: int | None = None
    deploy_serve: Callable[[EngineConfig, str, int, float, float], EngineConfig] | None = None
    serve_client: Callable[[EngineConfig], Engine] | None = None

    def kv_capacity(self) -> KVCapacity:
        return KVCapacity()

    def prompt_tokenizer(self) -> Callable[[Request], list[int]] | None:
        return None

    def capacity_lines(self, capacity: KVCapacity) -> list[str]:
        return []

    def run_facts(self) -> dict:
        return {}

    def provenance(self) -> dict:
        return {"engine_args": engine_args(self.config)}


def engine_args(cfg: EngineConfig) -> dict:
    """An engine config's fields after defaults, as JSON values, without credentials: a field whose name says it
    holds a secret (``llmrec.redact.is_secret_name``) is left out, URLs lose their user info and query values."""
    from llmrec.redact import is_secret_name, redacted

    return redacted({k: v for k, v in cfg.model_dump(mode="json").items() if not is_secret_name(k)})


def engine_provenance(engine) -> dict:
    """``engine.provenance()``, or {} for an object without the hook (a client of engines that run elsewhere);
    an engine whose hook fails gives ``{"error": …}`` (a provenance record never stops a run)."""
    hook = getattr(engine, "provenance", None)
    if not callable(hook):
        return {}
    try:
        return dict(hook())
    except Exception as e:  # noqa: BLE001 - recorded, never raised
        from llmrec.redact import redact_text

        return {"error": redact_text(f"{type(e).__name__}: {e}")}


def run_facts(engine) -> dict:
    """``engine.run_facts()``, or {} for a caller-side object without the hook (a client of engines that
    run elsewhere: an engine pool, a Serve app; their facts stay with them)."""
    hook = getattr(engine, "run_facts", None)
    return dict(hook()) if callable(hook) else {}


@dataclass(frozen=True)
class EngineSpec:
    name: str
    config_cls: type[EngineConfig]
    engine_cls: type


_ENGINE_METHODS = ("start", "generate", "count_tokens", "identity", "check_health", "close")


def check_engine(spec: EngineSpec, where: str) -> None:
    """Fail naming every member an engine class lacks or gets wrong (a ConfigError, one line)."""
    if not isinstance(spec, EngineSpec):
        raise ConfigError(f"engine {where} is a {type(spec).__name__}, not an EngineSpec (use @register_engine)")
    cls, problems = spec.engine_cls, []
    if not (isinstance(cls, type) and issubclass(cls, EngineBase)):
        problems.append(f"not a subclass of {EngineBase.__module__}.EngineBase")
    if not (isinstance(spec.config_cls, type) and issubclass(spec.config_cls, EngineConfig)):
        problems.append(f"config {spec.config_cls!r} is not an EngineConfig subclass")
    missing = [m for m in _ENGINE_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    problems += [f"{flag} must be a bool" for flag in ("thread_safe", "remote")
                 if not isinstance(getattr(cls, flag, False), bool)]
    problems += [f"{hook} must be callable or None" for hook in ("deploy_serve", "serve_client")
                 if getattr(cls, hook, None) is not None and not callable(getattr(cls, hook))]
    if problems:
        raise ConfigError(f"engine {where} ({_qualname(cls)}) does not conform to the protocol: {'; '.join(problems)}")


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def _discover() -> None:
    import llmrec.serving.engines as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"llmrec.serving.engines.{mod.name}")
    ENGINES.freeze()


ENGINES: Registry[EngineSpec] = Registry("engine", _discover, check_engine)


def register_engine(name: str, config_cls: type[EngineConfig]):
    def wrap(cls):
        ENGINES.register(name, EngineSpec(name, config_cls, cls))
        return cls

    return wrap


def engine_config(data: dict | EngineConfig, prefix: str = "engine") -> EngineConfig:
    """Validate a raw engine mapping against the config class its ``type`` names."""
    if isinstance(data, EngineConfig):
        return data
    if not isinstance(data, dict) or "type" not in data:
        raise ConfigError(f"'{prefix}' needs a 'type'. Available: {', '.join(ENGINES.names())}")
    spec = ENGINES.get(str(data["type"]))
    return validate(spec.config_cls, data, prefix)


def build_engine(cfg: dict | EngineConfig) -> Engine:
    """Config → an unstarted engine."""
    cfg = engine_config(cfg)
    return ENGINES.get(cfg.type).engine_cls(cfg)

