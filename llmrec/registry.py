"""One small registry type for engines, benchmarks, score tasks, models and readers.

Unknown names fail listing what is available; a second registration under the same
name fails instead of silently replacing the first; a frozen registry refuses new names.
Registries are the only module-level state in llmrec: each is filled once by its
discovery function and frozen after it.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Iterator, TypeVar

from llmrec.errors import ConfigError

T = TypeVar("T")


class RegistryError(ConfigError):
    """A name registered twice, or a registration after the registry was frozen."""


class Registry(Generic[T]):
    def __init__(self, kind: str, discover: Callable[[], None] | None = None,
                 check: Callable[[T, str], None] | None = None):
        """``check(item, where)`` raises when an item does not conform (run at registration and on
        every ``module:ATTR`` import), so a bad plugin fails before it is used."""
        self.kind = kind
        self._check = check
        self._items: dict[str, T] = {}
        self._discover = discover
        self._discovered = discover is None
        self._frozen = False
        self._discovering = False
        self._lock = threading.RLock()  # two threads' first lookups must not see a half-filled registry

    def register(self, name: str, item: T) -> T:
        if self._items.get(name) is item:
            return item
        if self._frozen:
            raise RegistryError(f"{self.kind} registry is frozen; cannot add '{name}'")
        if name in self._items:
            raise RegistryError(
                f"{self.kind} '{name}' is registered twice: {_where(self._items[name])} and {_where(item)}")
        if self._check is not None:
            self._check(item, f"'{name}'")
        self._items[name] = item
        return item

    def freeze(self) -> None:
        """No registrations after this (discovery is complete)."""
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def discover(self) -> None:
        """Run the discovery function once (idempotent, thread-safe)."""
        if self._discovered:
            return
        with self._lock:  # other threads wait here until discovery is complete
            if self._discovered or self._discovering or self._discover is None:
                return  # (a lookup from inside the discovery itself sees the partial registry)
            self._discovering = True
            try:
                self._discover()
                self._discovered = True
            finally:
                self._discovering = False

    def get(self, name: str) -> T:
        """The item registered as ``name``; ``"package.module:ATTR"`` imports an item defined
        outside the registry's folder (a plugin in a user's own package, a test's toy)."""
        self.discover()
        if ":" in name and name not in self._items:
            item = _import_object(name, self.kind)
            if self._check is not None:
                self._check(item, f"'{name}'")
            return item
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(
                f"Unknown {self.kind} '{name}'. Available: {', '.join(sorted(self._items)) or '(none)'}"
            ) from None

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._items


def _import_object(spec: str, kind: str):
    import importlib

    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{kind} '{spec}': cannot import {attr!r} from {module!r}: {e}") from e


def _where(item: object) -> str:
    mod = getattr(item, "__module__", None) or type(item).__module__
    return f"{mod}.{getattr(item, '__qualname__', type(item).__qualname__)}"
