"""Shared test fixtures. Tests never reach a model hub; data-dependent tests skip without data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """$LLMREC_DATA_DIR, else ../shared/data beside the checkout, else None."""
    env = os.environ.get("LLMREC_DATA_DIR")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data"]:
        if cand.is_dir():
            return cand
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("benchmark data not found: set LLMREC_DATA_DIR to a folder holding prefeval/, ml-100k/, ...")
    return d


def require_data(*parts: str) -> Path:
    """Path under the data dir, or skip the test naming what is missing."""
    d = shared_data_dir()
    if d is None or not (d.joinpath(*parts)).exists():
        pytest.skip(f"data file {'/'.join(parts)} not found under LLMREC_DATA_DIR (or ../shared/data)")
    return d.joinpath(*parts)


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray instance (2 CPUs) shared by every test that needs it."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
