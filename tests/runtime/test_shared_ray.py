"""The shared local Ray gives each test what it gave the first: a placement group a test leaves behind (a Tune or
Train run stopped half-way) is removed after it, else the next run on the 2-CPU Ray waits for ever for its CPUs."""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_a_test_that_leaves_a_placement_group(local_ray):
    import ray
    from ray.util import placement_group

    pg = placement_group([{"CPU": 1}])
    ray.get(pg.ready(), timeout=60)
    assert ray.available_resources().get("CPU", 0) < 2


def test_the_next_test_finds_every_cpu_free(local_ray):
    import ray

    deadline = time.monotonic() + 30  # the removal is asynchronous
    while ray.available_resources().get("CPU") != 2.0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU") == 2.0
