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
from typing import Protocol, runtime_checkable

from pydantic import Field

from llmrec.config import StrictModel, validate
from llmrec.errors import ConfigError
from llmrec.packing import KVCapacity
from llmrec.registry import Registry
from llmrec.types import Request, Result


class EngineConfig(StrictModel):
    """Fields every engine has. Subclasses add their own and fix ``type``."""

    type: str = Field(description="engine name (see `llmrec list`)")
    context_length: int | None = Field(
        None, ge=1, description="prompt+completion token limit; None = the engine's own"
    )


@runtime_checkable
class Engine(Protocol):
    """``config``: the validated config. Optional attribute ``thread_safe: bool`` (default
    False): when False, the Serve deployment serialises calls to the engine with a lock (and an
    engine pool actor takes one call at a time). Optional attribute ``remote: bool`` (default
    False): True for a client of a server elsewhere (openai), which runs inside its caller
    instead of in an engine pool of its own (``serving/engine_pool.py``).

    Optional planning hooks (callable before ``start``; read through ``kv_capacity`` and
    ``prompt_tokenizer`` below, which answer "unknown" for engines without them):
    ``kv_capacity() -> KVCapacity`` (one replica's KV budget in tokens, block size, max sequences:
    planned before start, measured after), ``prompt_tokenizer()`` (a function Request → the
    prompt's token ids from the model's tokenizer on this machine, or None) and
    ``capacity_lines(KVCapacity) -> list[str]`` (how the budget comes about, for ``llmrec plan``)."""

    config: EngineConfig

    def start(self) -> None: ...

    def generate(self, requests: list[Request]) -> list[Result]: ...

    def count_tokens(self, request: Request) -> int: ...

    def identity(self) -> dict: ...

    def check_health(self) -> bool: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EngineSpec:
    name: str
    config_cls: type[EngineConfig]
    engine_cls: type


def _discover() -> None:
    import llmrec.serving.engines as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"llmrec.serving.engines.{mod.name}")
    ENGINES.freeze()


ENGINES: Registry[EngineSpec] = Registry("engine", _discover)


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


def _hook(engine, name: str, default, *args):
    fn = getattr(engine, name, None)
    return fn(*args) if fn is not None else default


def kv_capacity(engine) -> KVCapacity:
    """The engine's KV capacity (``kv_capacity`` hook); unknown when it has none."""
    return _hook(engine, "kv_capacity", KVCapacity())


def prompt_tokenizer(engine):
    """Request → prompt token ids without starting the engine (``prompt_tokenizer`` hook), or None."""
    return _hook(engine, "prompt_tokenizer", None)


def capacity_lines(engine, capacity: KVCapacity) -> list[str]:
    """How the engine's budget comes about (``capacity_lines`` hook), for ``llmrec plan``; [] if unsaid."""
    return _hook(engine, "capacity_lines", [], capacity)
