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
    instead of in an engine pool of its own (``serving/engine_pool.py``)."""

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


ENGINES: Registry[EngineSpec] = Registry("engine", _discover, lambda o: isinstance(o, EngineSpec),
                                         "an llmrec.serving.engine.EngineSpec (name, config class, engine class)")


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
