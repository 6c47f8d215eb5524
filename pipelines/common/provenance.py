"""What stored results were produced from: the result-determining config and the content of the data files read.

A benchmark reads its data while it builds its samples and assets on the driver. ``reads_recorded`` watches the
files opened for reading in that span (a Python audit hook, so every reader — ``open``, pandas, json — is seen
without the benchmark declaring anything); ``data_fingerprint`` hashes the content (sha256) of those that are data
— under the data directory, or at (or under) a path the benchmark config names — cached per ``(path, size,
mtime)`` in the per-user cache, so a large data directory is hashed once, not at every run. Code (``.py``,
compiled modules), the Python installation and whatever else a process happens to open are left out.

The result store keeps ``{"config": …, "data": {file: sha256}}`` with every shard; resume compares it with the
current run's (``provenance_conflicts``) and takes only shards produced from the same config and data.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from llmrec import settings
from llmrec.provenance import HASH_CACHE_FILE, sha256_of  # noqa: F401 - where callers found them
from llmrec.provenance import read_hash_cache as _read_cache, write_hash_cache as _write_cache

_CODE = (".py", ".pyc", ".pyi", ".so", ".pth", ".pyd")
# the Python installation: its prefixes and every site-packages folder on the path (a checkout's venv reaches the
# packages it shares with other checkouts through one outside its prefix: the Makefile's $(VENV_CACHE))
_SYSTEM = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *(
    p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")))}) + (
    "/proc/", "/sys/", "/dev/")

_local = threading.local()  # .files: the set being recorded in this thread, if any
_hooked = False
_hook_lock = threading.Lock()


def _audit(event: str, args: tuple) -> None:
    files = getattr(_local, "files", None)
    if files is None or event != "open":
        return
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, int):
        return
    if isinstance(mode, str):
        if any(c in mode for c in "wax+"):
            return
    elif isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR):
        return
    files.add(os.fspath(path))


@contextmanager
def reads_recorded() -> Iterator[set[str]]:
    """The paths this thread opens for reading while inside the block (a set filled as they are opened)."""
    global _hooked
    with _hook_lock:
        if not _hooked:  # an audit hook cannot be removed: one, installed once, that records only inside blocks
            sys.addaudithook(_audit)
            _hooked = True
    outer = getattr(_local, "files", None)
    _local.files = files = set()
    try:
        yield files
    finally:
        _local.files = outer
        if outer is not None:
            outer.update(files)


def named_paths(config: Any, root: Path | None = None) -> list[str]:
    """The existing files and folders a config's strings name (as given, or relative to ``root``)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value and "\0" not in value and len(value) < 4096:
            for cand in (Path(value).expanduser(), *([Path(root) / value] if root is not None else [])):
                try:
                    if cand.exists() and os.path.realpath(cand) != os.sep:
                        found.append(os.path.realpath(cand))
                except OSError:
                    continue

    walk(config)
    return found


def _is_data(real: str, places: tuple[str, ...]) -> bool:
    if real.endswith(_CODE) or real.startswith(_SYSTEM):
        return False
    return any(real == p or real.startswith(p.rstrip(os.sep) + os.sep) for p in places)


def data_fingerprint(paths: set[str] | list[str], root: Path | None = None,
                     named: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """``file → sha256`` of every regular file in ``paths`` that is data: under ``root`` (the data directory;
    named relative to it, so the same data in another folder has the same fingerprint) or at or under one of the
    ``named`` paths (see ``named_paths``)."""
    cache_path = settings.cache_root() / HASH_CACHE_FILE
    cache = _read_cache(cache_path)
    out: dict[str, str] = {}
    changed = False
    base = os.path.realpath(root) + os.sep if root is not None else None
    places = tuple(named) + ((base,) if base else ())
    for path in sorted(set(paths)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        real = os.path.realpath(path)
        if not stat.S_ISREG(st.st_mode) or not _is_data(real, places):
            continue
        known = cache.get(real)
        if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
            digest = known[2]
        else:
            digest = sha256_of(real)
            cache[real] = [st.st_size, st.st_mtime_ns, digest]
            changed = True
        out[real[len(base):] if base and real.startswith(base) else real] = digest
    if changed:
        _write_cache(cache_path, cache)
    return out


def data_conflicts(stored: dict[str, str], now: dict[str, str]) -> list[str]:
    """``data: <file> …`` for each data file whose content differs, or that only one side read."""
    out = []
    for name in sorted(stored.keys() | now.keys()):
        if name not in now:
            out.append(f"data: {name}: read then, not now")
        elif name not in stored:
            out.append(f"data: {name}: read now, not then")
        elif stored[name] != now[name]:
            out.append(f"data: {name}: other content (sha256 {stored[name][:12]} → {now[name][:12]})")
    return out


def fingerprint_of(provenance: dict[str, Any]) -> str:
    blob = json.dumps(provenance, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
