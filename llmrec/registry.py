"""One small registry type for engines, benchmarks, score tasks, models and readers.

Unknown names fail listing what is available; a second registration under the same
name fails instead of silently replacing the first; a frozen registry refuses new names.
Registries are the only module-level state in llmrec: each is filled once by its
discovery function and frozen after it.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import sys
import threading
from typing import Callable, Generic, Iterator, TypeVar

from llmrec.errors import ConfigError

T = TypeVar("T")

# "package.module:ATTR": a dotted module path, a colon, an attribute name (dotted for a nested one)
_PLUGIN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", re.ASCII)


class RegistryError(ConfigError):
    """A name registered twice, or a registration after the registry was frozen."""


# True while results are read (leaderboard, compare, report, view, runs): names found in stored files
# (a run's recorded config, a suite index) resolve to installed items only, and no plugin module is imported.
_INSTALLED_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("llmrec_installed_only", default=False)


@contextlib.contextmanager
def installed_only() -> Iterator[None]:
    """Inside this block every registry resolves names to what is installed (discovered) only: a
    ``package.module:ATTR`` name is never imported. It still resolves when that module is already imported in
    this process (a plugin of a config the user ran here, e.g. ``llmrec suite``'s closing leaderboard); the
    attribute is then read from the module's namespace, so no module ``__getattr__`` runs either. Results are
    shared and downloaded: what they name must not run code on the reader's machine."""
    token = _INSTALLED_ONLY.set(True)
    try:
        yield
    finally:
        _INSTALLED_ONLY.reset(token)


def reading_results() -> bool:
    """Whether the caller is inside :func:`installed_only`."""
    return _INSTALLED_ONLY.get()


class Registry(Generic[T]):
    def __init__(self, kind: str, discover: Callable[[], None] | None = None,
                 check: Callable[[T, str], None] | None = None, find: Callable[[str], None] | None = None):
        """``check(item, where)`` raises when an item does not conform (run at registration and on
        every ``module:ATTR`` import), so a bad plugin fails before it is used (``expects`` makes
        one from a predicate). ``find(name)``: registers the one item called ``name`` where it can be
        found without discovering them all (a benchmark's own package), else does nothing; a lookup by
        name tries it before discovery, so a process that uses one item imports that item's code only
        (a run's map actors, a CLI verb given one name). Listing, ``in`` and an unknown name discover
        all, as before."""
        self.kind = kind
        self._check = check
        self._items: dict[str, T] = {}
        self._discover = discover
        self._find = find
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
        if self._find is not None and not self._discovered and ":" not in name and name not in self._items:
            with self._lock:  # as discovery: another thread's lookup waits for a half-imported item
                if not self._discovered and name not in self._items:
                    self._find(name)
        if name in self._items:
            return self._items[name]
        self.discover()
        if ":" in name and name not in self._items:
            return self._loaded_plugin(name) if _INSTALLED_ONLY.get() else self._plugin(name)
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(
                f"Unknown {self.kind} '{name}'" + (" (not installed)" if _INSTALLED_ONLY.get() else "")
                + f". Available: {', '.join(sorted(self._items)) or '(none)'}"
            ) from None

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._items

    def _loaded_plugin(self, spec: str) -> T:
        """A ``package.module:ATTR`` item read from results: found only in a module this process already
        imported (nothing is imported, no attribute hook runs), else refused as not installed."""
        module, _, attr = spec.partition(":")
        obj = sys.modules.get(module) if _PLUGIN.fullmatch(spec) else None
        for part in attr.split(".") if obj is not None else ():
            obj = vars(obj).get(part) if hasattr(obj, "__dict__") else None
            if obj is None:
                break
        if obj is not None and self._check is not None:
            try:
                self._check(obj, f"'{spec}'")
            except ConfigError:
                obj = None
        if obj is None:
            raise ConfigError(
                f"unknown {self.kind} '{spec}' (not installed; installed: {', '.join(self.names()) or 'none'}). "
                f"Results never import the {self.kind}s they name: a plugin is loaded only from a config you run "
                "(`llmrec run` / `llmrec suite`)")
        return obj

    def _plugin(self, spec: str) -> T:
        """The item at ``package.module:ATTR``: the form is checked before anything is imported,
        the object after."""
        import importlib

        if not _PLUGIN.fullmatch(spec):
            raise ConfigError(
                f"{self.kind} '{spec}' is neither a registered {self.kind} ({', '.join(self.names()) or 'none'}) "
                "nor a plugin path of the form 'package.module:ATTR' (a dotted module name, a colon, an attribute)")
        module, _, attr = spec.partition(":")
        try:
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception as e:  # noqa: BLE001 - any failure of the user's module is reported as one line
            raise ConfigError(f"{self.kind} '{spec}': cannot import {attr!r} from {module!r}: "
                              f"{type(e).__name__}: {e}") from e
        if self._check is not None:
            self._check(obj, f"'{spec}'")
        return obj


def expects(kind: str, accepts: Callable[[object], bool], expected: str) -> Callable[[object, str], None]:
    """A registry check from a predicate: anything it refuses fails naming what was expected."""
    def check(item: object, where: str) -> None:
        if not accepts(item):
            raise ConfigError(f"{kind} {where} is {_describe(item)}; expected {expected}")

    return check


def _describe(obj: object) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__qualname__}"
    return f"a {type(obj).__qualname__}"


def _where(item: object) -> str:
    mod = getattr(item, "__module__", None) or type(item).__module__
    return f"{mod}.{getattr(item, '__qualname__', type(item).__qualname__)}"
