"""Checks a run passes before its first sample: what would otherwise fail after the work.

``llmrec run`` and ``llmrec suite`` call :func:`check_before_work` on the driver before Ray starts. Each
failure is one line naming the key, variable, path or store (exit 2, nothing done):

- every variable a ``*_env`` key of the subject or judge names (``engine.api_key_env``) is set here;
- ``output.dir`` is a folder (or can be made one) where a file can be written, read back and deleted, and
  a local one has at least ``$LLMREC_MIN_FREE_MB`` (default 100) MB free; it is not inside a run directory;
- the run directory's name fits a file system's name limit;
- the request cache file can be opened; it is not the sqlite file of the tracking store, nor inside a run directory;
- the tracking store answers (``tracking.check_store``: a few seconds, no retries), so a wrong or
  unreachable ``tracking.uri`` is found now and not after all the samples.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from llmrec import settings, storage, tracking
from llmrec.config import NAME_MAX_BYTES
from llmrec.errors import ConfigError
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.rundir import refuse_inside_runs

log = logging.getLogger(__name__)


def env_names(section: dict | None, prefix: str) -> list[tuple[str, str]]:
    """``(key, variable)`` for every ``*_env`` key of an engine section that names a variable."""
    out = []
    for k, v in (section or {}).items():
        if isinstance(v, dict):
            out.extend(env_names(v, f"{prefix}.{k}"))
        elif str(k).endswith("_env") and isinstance(v, str) and v:
            out.append((f"{prefix}.{k}", v))
    return out


def check_env(cfg: RunConfig) -> None:
    named = env_names(cfg.engine.model_dump(mode="json"), "engine")
    if cfg.judge is not None:
        named += env_names(cfg.judge.model_dump(mode="json"), "judge")
    missing = [(key, var) for key, var in named if settings.missing_env([var])]
    if missing:
        raise ConfigError("; ".join(f"{key}: the environment variable {var} is not set" for key, var in missing)
                          + " (set it before the run; its value is read from the environment, never from the config)")


def check_name(run_dir: storage.Storage) -> None:
    size = len(run_dir.name.encode("utf-8"))
    if size > NAME_MAX_BYTES:
        raise ConfigError(f"output.run_name: the run directory name is {size} bytes long; a folder name holds at "
                          f"most {NAME_MAX_BYTES} (give a shorter output.run_name): {run_dir.name[:60]}…")


def check_output(where: str) -> None:
    """``where`` (``output.dir``) can hold the run: a writable folder with free space."""
    loc = storage.Storage(where)
    if loc.local:
        refuse_inside_runs(loc.uri, "output.dir")  # a run's folder is its own: another run is never put inside it
    if loc.local and Path(loc.uri).exists() and not Path(loc.uri).is_dir():
        raise ConfigError(f"output.dir {loc.uri}: is a file, not a folder; give a folder for the run directories")
    try:
        loc.check_writable()
    except storage.StorageError as e:
        raise ConfigError(f"output.dir {e}") from e
    if loc.local:
        free_mb = shutil.disk_usage(loc.uri).free / 2**20
        need = settings.min_free_mb()
        if free_mb < need:
            raise ConfigError(f"output.dir {loc.uri}: only {free_mb:.1f} MB free on its disk, less than the "
                              f"{need:g} MB a run needs at least; free some space, or set ${settings.MIN_FREE_ENV} "
                              "to a smaller figure")


def check_cache_place(path: str | None, tracking_uri: str | None) -> None:
    """The request cache file is neither the tracking store's sqlite file (its table would be added to MLflow's
    database) nor inside a run directory (only the run writes there)."""
    if path is None:
        return
    store = tracking.local_store(tracking.tracking_uri(tracking_uri))
    if store is not None and Path(storage.resolve(store)) == Path(path).expanduser().resolve():
        raise ConfigError(f"output.cache_path {path}: is the MLflow tracking store's file "
                          f"({tracking.tracking_uri(tracking_uri)}); give the request cache a file of its own")
    refuse_inside_runs(path, "output.cache_path")


def check_cache(path: str | None) -> None:
    """The request cache file opens (an unwritable folder or a corrupt file fails here, naming it)."""
    if path is None:
        return
    import sqlite3

    from llmrec.serving.cache import RequestCache

    try:
        RequestCache(path).close()
    except (sqlite3.Error, OSError) as e:
        raise ConfigError(f"output.cache_path {path}: the request cache cannot be opened: {e} (or run with "
                          "--no-cache)") from e


def check_before_work(cfgs: list[RunConfig]) -> None:
    """Every check of the module docstring, once per distinct output folder, cache and tracking store."""
    from llmrec.pipelines.runner.execution import cache_path_for, run_dir_for

    seen: set = set()
    for cfg in cfgs:
        check_env(cfg)
        check_name(run_dir_for(cfg))
        check_cache_place(cache_path_for(cfg), cfg.tracking.uri)
        for key, check, arg in (("out", check_output, cfg.output.dir), ("cache", check_cache, cache_path_for(cfg)),
                                ("tracking", tracking.check_store,
                                 cfg.tracking.uri if cfg.tracking.enabled else None)):
            if (key, arg) in seen or (key == "tracking" and not cfg.tracking.enabled):
                continue
            seen.add((key, arg))
            check(arg)
