"""Shared test fixtures. Tests never reach a model hub; data-dependent tests skip without data.

Tests that run the embedded model under llama.cpp give it one thread (``n_threads: 1``, or
``--set engine.n_threads=1`` over a shipped config): llama.cpp's threads spin-wait, and the slow tier runs two
tests at once on two cores. Beside one busy process, two threads took 3x as long as one (docs/measurements.md)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

REPO = Path(__file__).resolve().parents[1]

# the tiers (markers), the per-test time budget and the time report: tests/tiers.py
pytest_plugins = ["tests.tiers", "pytester"]


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


# the one shape of the tests' Ray
LOCAL_RAY = dict(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)


def start_local_ray() -> None:
    """The tests' local Ray (2 CPUs; a new instance, never a cluster another process left running),
    started once: every test that needs Ray gets this one, so the resources a test sees never depend
    on which tests ran before it."""
    import ray

    if not ray.is_initialized():
        ray.init(**LOCAL_RAY)


@contextlib.contextmanager
def ray_stopped():
    """No Ray in this process inside the block (a test that starts its own: a cluster, a sweep in
    an S3 environment); the shared local Ray is back afterwards if it was up before."""
    import ray

    was = ray.is_initialized()
    ray.shutdown()
    try:
        yield
    finally:
        ray.shutdown()
        if was:
            start_local_ray()


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray instance (2 CPUs) shared by every test that needs it."""
    import ray

    start_local_ray()
    yield
    ray.shutdown()


@pytest.fixture
def own_local_ray():
    """A local Ray of this test's own (2 CPUs), shut down after it with every actor it holds: for Ray Train
    runs, whose controller actor can outlive a trial Tune stopped early and would take the shared Ray's CPUs
    back from the tests after it. The shared local Ray is back afterwards if it was up before."""
    with ray_stopped():
        start_local_ray()
        yield


@pytest.fixture(autouse=True)
def _local_ray_left_as_found(request):
    """After a test on the shared local Ray: the placement groups it left (a Tune or Train run stopped half-way
    keeps its trials' groups while this process lives) are removed, with a warning naming the test. A group left
    behind holds CPUs the next test's run needs, and that run waits for them for ever (the shared Ray has 2)."""
    yield
    if "local_ray" not in request.fixturenames:
        return
    import warnings

    import ray
    from ray.util import placement_group_table, remove_placement_group
    from ray.util.placement_group import PlacementGroup

    if not ray.is_initialized():
        return
    left = [pg_id for pg_id, info in placement_group_table().items() if info.get("state") != "REMOVED"]
    for pg_id in left:
        remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pg_id))))
    if left:
        warnings.warn(f"{request.node.nodeid} left {len(left)} placement group(s) on the shared local Ray; removed")
