"""Run options through the real stages with scripted engines: no judge, no taxonomy, UIH ablation,
retries, failures, custom and mapped datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.benchmarks.gistbench import schema as S
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.benchmarks.gistbench.predictions import score_predictions
from llmrec.pipelines.runner.worker import process_samples
from tests.conftest import require_data
from tests.pipelines.benchmarks.gistbench.conftest import ScriptedEngine, kind

MOCK = "gistbench/gistbench/assets/mock_dataset.json"
ALL_IDS = json.dumps([{"interest": "Everything I Saw", "item_ids": [str(i) for i in range(1, 26)]}])


def data_dir() -> Path:
    return require_data(MOCK).parents[3]


def run(cfg: GistbenchConfig, subject, judge=None):
    bench = get_benchmark("gistbench")
    samples = bench.build_samples(cfg, data_dir())
    engines = {"subject": subject, "judge": judge or subject}
    return process_samples(bench, cfg, samples, engines.__getitem__, retries=0, backoff_s=0,
                           assets=bench.assets(cfg, data_dir()))


def cfg_of(**kw) -> GistbenchConfig:
    return GistbenchConfig(name="gistbench", dataset="synthetic", path=MOCK, **kw)


def test_no_judge_counts_every_cited_object_and_skips_is():
    cfg = cfg_of(judge={"enabled": False}, taxonomy={"mapper": "none"})
    assert [s.name for s in get_benchmark("gistbench").stages(cfg)] == ["extract"]
    rows = run(cfg, ScriptedEngine(lambda r: ALL_IDS))
    for r in rows:
        rec = r["interests_scored"][0]
        assert rec["verified"] and (rec["correct"], rec["backing"]) == (0, 0)
        assert rec["category_id"] < 0  # its own category
    # the score task recomputes the same verification from the written evidence
    lines = get_benchmark("gistbench").predictions(rows, None)
    assert score_predictions(lines, {})["ig_p_mean"] == 1.0


def test_uih_ablation_runs_every_chunk_size():
    cfg = cfg_of(judge={"enabled": False}, taxonomy={"mapper": "none"}, extraction={"chunk_sizes": [3, 10]})
    subject = ScriptedEngine(lambda r: ALL_IDS)
    rows = run(cfg, subject)
    assert sorted(r["sample_id"] for r in rows if r["user_id"] == "1") == ["synthetic/1/uih10", "synthetic/1/uih3"]
    by = {(r["user_id"], r["chunk_size"]): r for r in rows}
    assert by[("1", 3)]["n_chunks"] == 4 and by[("1", 10)]["n_chunks"] == 1
    metrics = get_benchmark("gistbench").aggregate(cfg, rows, None)
    assert "uih3/ig_f1_median" in metrics and "uih10/is_mean" in metrics
    models = {x["model"] for x in get_benchmark("gistbench").predictions(rows, None)}
    assert models == {"subject@uih3", "subject@uih10"}


def test_extraction_retry_then_failed_chunk():
    replies = iter(["Sorry, here you go: interests are jazz", ALL_IDS])
    cfg = cfg_of(judge={"enabled": False}, taxonomy={"mapper": "none"}, extraction={"retries": 1}, user_ids=["1"])
    subject = ScriptedEngine(lambda r: next(replies))
    row = run(cfg, subject)[0]
    chunk = row["extraction"]["0"]
    assert chunk["state"] == "ok" and chunk["attempts"] == 2 and chunk["parse_error"] is None
    assert chunk["texts"] == ["Sorry, here you go: interests are jazz", ALL_IDS] and chunk["answer"]
    assert subject.seen[1].messages[-1].content.startswith("Your answer could not be read as JSON")
    row = run(cfg.model_copy(update={"extraction": cfg.extraction.model_copy(update={"retries": 0})}),
              ScriptedEngine(lambda r: "no"))[0]
    assert row["status"] == "ok" and row["failed_chunks"] == 1 and row["interests_scored"] == []


def test_unparsable_judge_is_recorded_not_fatal(tmp_path):
    def judge(req):
        return {"judge": "hmm", "overlap": "NONE", "is": "no idea", "taxonomy": "1: 999"}[kind(req)]

    cfg = cfg_of(user_ids=["3"], taxonomy={"cache_path": str(tmp_path / "t.sqlite")})
    row = run(cfg, ScriptedEngine(lambda r: ALL_IDS), ScriptedEngine(judge))[0]
    assert row["status"] == "ok"
    judged = row["judge"]["Everything I Saw"]
    assert judged["state"] == "missed" and judged["attempts"] == 3 and judged["texts"] == ["hmm"] * 3
    assert judged["parse_error"] and judged["answer"] is None
    assert row["specificity"]["Everything I Saw"]["state"] == "missed"
    rec = row["interests_scored"][0]
    assert not rec["verified"] and rec["correct"] == 0 and rec["backing"] == 5
    assert rec["category_id"] == 0  # an invalid category number maps to "other"


def test_engine_error_fails_the_sample_only():
    class Broken:
        def generate(self, requests):
            raise RuntimeError("server down")

    cfg = cfg_of(judge={"enabled": False}, taxonomy={"mapper": "none"})
    rows = run(cfg, Broken())
    assert {r["status"] for r in rows} == {"failed"} and "server down" in rows[0]["error"]
    metrics = get_benchmark("gistbench").aggregate(cfg, rows, None)
    assert metrics["users_failed"] == 3 and metrics["n_users"] == 0


def test_custom_dataset_detects_its_signals(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_text("".join(json.dumps({"user_id": "u", "object_id": str(i), "object_text": f"t{i}",
                                     "interaction_type": S.EXP_POS if i % 2 else S.EXP_NEG,
                                     "interaction_time": i}) + "\n" for i in range(6)))
    cfg = GistbenchConfig(name="gistbench", dataset="custom", path=p, taxonomy={"mapper": "none"})
    sample = get_benchmark("gistbench").build_samples(cfg, tmp_path)[0]
    assert sample["signals"] == [S.EXP_NEG, S.EXP_POS] and sample["object_name"] == "items"
    assert [e["object_id"] for e in sample["_chunks"][0]] == ["5", "4", "3", "2", "1", "0"]


def test_movielens_users_from_the_interaction_layer():
    root = require_data("ml-100k", "u.data").parents[1]
    cfg = GistbenchConfig(name="gistbench", dataset="ml-100k", users=2, taxonomy={"mapper": "none"})
    samples = get_benchmark("gistbench").build_samples(cfg, root)
    s = samples[0]
    assert s["object_name"] == "movies" and s["signals"] == sorted([S.EXP_POS, S.IMP_POS, S.EXP_NEG])
    assert all(len(c) <= 100 for c in s["_chunks"]) and sum(map(len, s["_chunks"])) == s["n_engagements"]
    assert " | " in s["_chunks"][0][0]["object_text"]  # title | genres
    assert len(s["_pool"]) == 1000


@pytest.mark.slow
@pytest.mark.model
def test_embedding_mapper_through_aggregation(tmp_path):
    cfg = cfg_of(judge={"enabled": False}, user_ids=["1"],
                 taxonomy={"mapper": "embedding", "cache_path": str(tmp_path / "t.sqlite")})
    reply = json.dumps([{"interest": "Mountain Hiking Trails", "item_ids": ["4", "5"]}])
    rows = run(cfg, ScriptedEngine(lambda r: reply))
    assert rows[0]["interests_scored"][0]["category_id"] is None  # mapped when the run is aggregated
    lines = get_benchmark("gistbench").predictions(rows, None)
    assert lines[0]["category_id"] == 133  # Hiking
    assert get_benchmark("gistbench").aggregate(cfg, rows, None)["ig_p_mean"] == 1.0
