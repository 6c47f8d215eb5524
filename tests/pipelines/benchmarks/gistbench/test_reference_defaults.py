"""GISTBench IS distractors follow the reference by default (drawn from the whole filtered pool, the user's
own other objects included); the paper appendix's exclusion is an option, recorded in ``protocol``."""

from __future__ import annotations

import json

from llmrec import tracking
from llmrec.pipelines.benchmarks.gistbench import BENCHMARK
from llmrec.pipelines.benchmarks.gistbench.config import SpecificityConfig
from llmrec.pipelines.benchmarks.gistbench.specificity import build_pool, build_test_set, overlap_candidates
from llmrec.pipelines.protocol import protocol_record
from llmrec.pipelines.registry import benchmark_config


def protocol_tag(cfg) -> dict:
    return json.loads(tracking.run_tags("run", protocol_record(BENCHMARK, cfg))[tracking.TAG_PROTOCOL])


def test_exclude_user_objects_default_is_the_reference_and_recorded():
    cfg = benchmark_config({"name": "gistbench"})
    assert cfg.specificity.exclude_user_objects is False
    assert protocol_tag(cfg)["specificity"]["exclude_user_objects"] is False
    option = benchmark_config({"name": "gistbench", "specificity": {"exclude_user_objects": True}})
    assert protocol_tag(option)["specificity"]["exclude_user_objects"] is True


def test_default_distractors_may_be_the_users_own_objects():
    cfg = SpecificityConfig()
    objects = {f"o{i}": f"text {i}" for i in range(60)}
    history = {f"o{i}": objects[f"o{i}"] for i in range(30)}  # half the pool is the user's
    pool = build_pool(objects, cfg.pool_size, cfg.seed)
    probe = build_test_set("u", "x", ["o1"], history, overlap_candidates(pool, set(history), cfg.exclude_user_objects),
                           set(), cfg)
    distractors = set(probe.ids) - set(probe.backing)
    assert len(probe.items) == 50 and distractors & set(history)  # 49 of 59: some must be the user's
