"""IS test sets: sizes, exclusions, and identical distractors in two processes with different hash seeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from llmrec.pipelines.benchmarks.gistbench.config import SpecificityConfig
from llmrec.pipelines.benchmarks.gistbench.specificity import build_pool, build_test_set, overlap_candidates
from tests.conftest import REPO as _REPO

REPO = str(_REPO)

SCRIPT = """
import json
from llmrec.pipelines.benchmarks.gistbench.config import SpecificityConfig
from llmrec.pipelines.benchmarks.gistbench.specificity import build_pool, build_test_set, overlap_candidates
objects = {f"o{i}": f"text {i}" for i in range(3000)}
history = {f"o{i}": f"text {i}" for i in range(40)}
cfg = SpecificityConfig()
pool = build_pool(objects, cfg.pool_size, cfg.seed)
cands = overlap_candidates(pool, set(history), True)
sets = {}
for name in ["Jazz Piano", "Trail Running", "Sourdough"]:
    probe = build_test_set("u7", name, [f"o{i}" for i in range(12)], history, cands, {"o2999"}, cfg)
    sets[name] = probe.ids
print(json.dumps({"pool": [o[0] for o in pool], "sets": sets}))
"""


def _run(hashseed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": REPO}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout)


@pytest.mark.integration  # interpreters with other hash seeds
def test_distractor_sets_identical_across_processes():
    first, second = _run("1"), _run("4242")
    assert first == second
    # and equal to this process's own result (whatever its hash seed)
    local = json.loads(subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True,
                                      cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}).stdout)
    assert local == first


def test_test_set_shape():
    cfg = SpecificityConfig(exclude_user_objects=True)  # the option (paper appendix 11)
    objects = {f"o{i}": f"text {i}" for i in range(200)}
    history = {f"o{i}": objects[f"o{i}"] for i in range(10)}
    pool = build_pool(objects, cfg.pool_size, cfg.seed)
    assert len(pool) == 200
    cands = overlap_candidates(pool, set(history), True)
    probe = build_test_set("u", "x", ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "zz"], history, cands, {"o50"}, cfg)
    assert len(probe.backing) == 5 and set(probe.backing) <= {f"o{i}" for i in range(1, 8)}
    assert len(probe.items) == 50 and len(set(probe.ids)) == 50
    distractors = set(probe.ids) - set(probe.backing)
    assert not distractors & set(history) and "o50" not in distractors
    # the reference's behaviour (the default): the user's other objects may be distractors
    ref_cfg = SpecificityConfig()
    ref = build_test_set("u", "x", ["o1"], history,
                         overlap_candidates(pool, set(history), ref_cfg.exclude_user_objects), set(), ref_cfg)
    assert ref.backing == ["o1"] and len(ref.items) == 50
    assert build_test_set("u", "x", ["zz"], history, cands, set(), cfg).items == []  # nothing to back it


def test_pool_is_a_stable_sample():
    objects = {f"o{i}": "" for i in range(50)}
    a = build_pool(objects, 10, 42)
    b = build_pool(dict(reversed(list(objects.items()))), 10, 42)  # input order does not matter
    assert a == b and len(a) == 10
    assert build_pool(objects, 10, 43) != a
