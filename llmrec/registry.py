"""One small registry type for engines, benchmarks and score tasks.

Unknown names fail listing what is available; a second registration under the same
name fails instead of silently replacing the first.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from llmrec.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, discover: Callable[[], None] | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._discover = discover
        self._discovered = discover is None

    def register(self, name: str, item: T) -> T:
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._items[name] = item
        return item

    def decorator(self, name: str) -> Callable[[T], T]:
        def wrap(item: T) -> T:
            return self.register(name, item)

        return wrap

    def _ensure(self) -> None:
        if not self._discovered and self._discover is not None:
            self._discovered = True
            self._discover()

    def get(self, name: str) -> T:
        self._ensure()
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(
                f"Unknown {self.kind} '{name}'. Available: {', '.join(sorted(self._items)) or '(none)'}"
            ) from None

    def names(self) -> list[str]:
        self._ensure()
        return sorted(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        self._ensure()
        return name in self._items
