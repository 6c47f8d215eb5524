"""Every environment variable llmrec reads, read here and nowhere else."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_dir

DATA_DIR_ENV = "LLMREC_DATA_DIR"
CACHE_DIR_ENV = "LLMREC_CACHE_DIR"
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
RAY_ADDRESS_ENV = "RAY_ADDRESS"
GIT_COMMIT_ENV = "LLMREC_GIT_COMMIT"  # set by `llmrec submit` for code shipped without .git
STORAGE_TIMEOUT_ENV = "LLMREC_STORAGE_TIMEOUT_S"  # seconds a storage URI (s3://, gs://) may take to connect/answer
DEFAULT_STORAGE_TIMEOUT_S = 10.0
MIN_FREE_ENV = "LLMREC_MIN_FREE_MB"  # free space (MB) a local output.dir must have before a run starts
DEFAULT_MIN_FREE_MB = 100.0
RAY_HOST_ENV = "LLMREC_RAY_HOST"  # the address a local Ray instance listens on (default: the loopback only)
LOOPBACK = "127.0.0.1"
TRACKING_CHECK_TIMEOUT_S = 10.0  # how long the check before a run waits for the tracking store to answer
TRACKING_CHECK_SLOW_TRIES = 3  # a server that accepted the connection but is slow to answer gets this many tries,
#                               each twice as long as the one before (10 + 20 + 40 s): busy is not broken
MLFLOW_LOG_LEVEL_ENV = "MLFLOW_LOGGING_LEVEL"  # MLflow sets its loggers' level from it when it is imported

DEFAULT_TRACKING_URI = "sqlite:///mlruns.db"
DEFAULT_ARTIFACT_ROOT = "./mlartifacts"


def cache_root() -> Path:
    """Per-user cache (downloaded data, request cache, assembled model files)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or user_cache_dir("llmrec"))


def env_data_dir() -> Path | None:
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else None


def env_tracking_uri() -> str | None:
    return os.environ.get(TRACKING_URI_ENV) or None


def read_secret(env_name: str | None) -> str | None:
    """Read a secret (an API key) from the environment variable whose *name* is configured."""
    return os.environ.get(env_name) if env_name else None


def env_ray_address() -> str | None:
    """The Ray cluster `llmrec submit` / `llmrec jobs` talk to (the dashboard URL, e.g. http://head:8265)."""
    return os.environ.get(RAY_ADDRESS_ENV) or None


def missing_env(names: list[str]) -> list[str]:
    """Which of these variables are unset or empty here (their values are never returned)."""
    return [n for n in names if not os.environ.get(n)]


def env_git_commit() -> str | None:
    """The commit of code shipped to a cluster without its .git (set by ``llmrec submit``)."""
    return os.environ.get(GIT_COMMIT_ENV) or None


def ray_host() -> str:
    """The address a local Ray instance's servers (GCS, raylet, workers, agents) listen on: ``$LLMREC_RAY_HOST``,
    else 127.0.0.1, so nothing outside this machine can reach them."""
    return os.environ.get(RAY_HOST_ENV, "").strip() or LOOPBACK


def min_free_mb() -> float:
    """The free space (MB) a local ``output.dir`` must have before a run starts (``$LLMREC_MIN_FREE_MB``)."""
    return _env_float(MIN_FREE_ENV, DEFAULT_MIN_FREE_MB, 0.0)


def storage_timeout_s() -> float:
    """Connect / request timeout of S3 and the retry time limit of GCS (``$LLMREC_STORAGE_TIMEOUT_S``)."""
    return _env_float(STORAGE_TIMEOUT_ENV, DEFAULT_STORAGE_TIMEOUT_S, 0.5)


def _env_float(name: str, default: float, least: float) -> float:
    """A number from the environment variable ``name``, at least ``least``; ``default`` when unset or not a number."""
    value = os.environ.get(name)
    try:
        return max(least, float(value)) if value else default
    except ValueError:
        return default


def default_mlflow_log_level(level: str) -> None:
    """The level MLflow's loggers get when MLflow is imported (later, lazily, also in Ray workers, which inherit
    the environment), unless the user set one: MLflow resets them to INFO on import, whatever was set before."""
    os.environ.setdefault(MLFLOW_LOG_LEVEL_ENV, level)
