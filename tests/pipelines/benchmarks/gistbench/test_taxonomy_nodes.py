"""The taxonomy mapping cache on a cluster: one cache, the driver's.

Two worker processes stand in for two nodes (each its own ``LLMREC_CACHE_DIR``, i.e. its own
disk) and run the real stages on half the users each, with the assets the driver read. No
process but the driver creates a cache file; the driver commits the run's mappings when it
aggregates; a second run gets them through its assets, asks the judge no taxonomy question and
counts the hits.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import pytest

from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.registry import get_benchmark
from tests.conftest import require_data

MOCK = "gistbench/gistbench/assets/mock_dataset.json"


def node(job: tuple[str, dict, list[dict], dict]) -> tuple[list[dict], int]:
    """One worker node: its own cache root; runs the stages; returns rows and taxonomy questions asked."""
    cache_root, cfg, samples, assets = job
    os.environ["LLMREC_CACHE_DIR"] = cache_root
    from llmrec.pipelines.runner.worker import process_samples
    from tests.pipelines.benchmarks.gistbench.conftest import ScriptedEngine, kind
    from tests.pipelines.benchmarks.gistbench.test_mock_pipeline import extractor, judge_respond

    judge = ScriptedEngine(judge_respond)
    rows = process_samples(get_benchmark("gistbench"), GistbenchConfig(**cfg), samples,
                           {"subject": extractor("A"), "judge": judge}.__getitem__, retries=0, backoff_s=0,
                           assets=assets)
    return rows, sum(kind(r) == "taxonomy" for r in judge.seen)


def run_on_two_nodes(cfg: GistbenchConfig, data_dir: Path, nodes: list[Path]) -> tuple[list[dict], int]:
    bench = get_benchmark("gistbench")
    samples, assets = bench.build_samples(cfg, data_dir), bench.assets(cfg, data_dir)  # the driver
    halves = [samples[::2], samples[1::2]]
    jobs = [(str(n), cfg.model_dump(mode="json"), h, assets) for n, h in zip(nodes, halves)]
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:  # a fresh process per node
        results = pool.map(node, jobs)
    rows = sorted((r for rs, _ in results for r in rs), key=lambda r: r["sample_id"])
    return rows, sum(n for _, n in results)


def test_workers_never_open_the_cache_and_a_second_run_reuses_it(tmp_path, monkeypatch):
    data_dir = require_data(MOCK).parents[3]
    driver = tmp_path / "driver"
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(driver))
    nodes = [tmp_path / "node1", tmp_path / "node2"]
    cfg = GistbenchConfig(name="gistbench", dataset="synthetic", path=MOCK, scoring={"bootstrap": 10})
    bench = get_benchmark("gistbench")
    cache_file = driver / "gistbench" / "taxonomy.sqlite"

    rows, asked = run_on_two_nodes(cfg, data_dir, nodes)
    assert asked > 0 and all(r["status"] == "ok" for r in rows)
    assert not cache_file.exists()  # no worker opened the driver's cache path ...
    assert not any(n.exists() and any(n.rglob("*")) for n in nodes)  # ... nor a cache of its own
    first = bench.aggregate(cfg, rows, None)  # on the driver: commits the run's mappings
    assert cache_file.is_file()
    assert first["taxonomy_cache_hits"] == 0 and first["taxonomy_mapped"] == 6

    again, asked = run_on_two_nodes(cfg, data_dir, nodes)
    assert asked == 0  # every name came with the assets
    assert not any(n.exists() and any(n.rglob("*")) for n in nodes)
    second = bench.aggregate(cfg, again, None)
    assert second["taxonomy_cache_hits"] == 6 and second["taxonomy_mapped"] == 0
    for key in ("ig_f1_mean", "is_mean", "hm_mean", "taxonomy_other_rate"):
        assert second[key] == pytest.approx(first[key]), key
    cats = {x["interest"]: x["category_id"] for r in again for x in r["interests_scored"]}
    assert cats["Music Instruments and Theory"] == 146 and cats["Deep Learning Models"] == 16


def test_first_row_wins_when_users_map_a_name_differently(tmp_path):
    """Two users mapped the same name in one run (on different nodes): the first in sample order is
    committed, and every user gets it."""
    from llmrec.pipelines.benchmarks.gistbench import taxonomy
    from llmrec.pipelines.benchmarks.gistbench.aggregate import resolve_categories

    ref = {"mapper": "llm", "cache_path": str(tmp_path / "t.sqlite"), "namespace": "llm:x",
           "taxonomy_path": None, "embedding_model": None}
    rows = [{"status": "ok", "taxonomy_ref": ref, "categories": {"Jazz": c},
             "interests_scored": [{"interest": "Jazz", "category_id": c}]} for c in (7, 9)]
    assert [rec[0]["category_id"] for rec in resolve_categories(rows)] == [7, 7]
    assert taxonomy.TaxonomyCache(tmp_path / "t.sqlite", "llm:x").all() == {"Jazz": 7}
