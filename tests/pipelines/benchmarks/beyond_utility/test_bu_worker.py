"""The benchmark through the runner's worker (no Ray) with the fake engine: stages, re-asks, outputs."""

from __future__ import annotations

import json

import pytest

from llmrec.pipelines.benchmarks.beyond_utility import BENCHMARK, plots
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig, UserSampling
from llmrec.pipelines.runner.scoring import score_file
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.conftest import require_data

REPLY = "['Toy Story (1995)', 'star wars (1977)', 'A Film That Does Not Exist', 'Fargo (1996)']"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=6), prompts=["history", "profile"],
                              orders=["shuffled", "target_first"])
    engine = build_engine({"type": "fake", "default": REPLY,
                           "rules": [{"contains": "personality", "reply": "Thinks.\n\nLoves sci-fi."}]})
    engine.start()
    samples = BENCHMARK.build_samples(cfg, data)
    rows = process_samples(BENCHMARK, cfg, samples, lambda role: engine, retries=0)
    return cfg, rows, tmp_path_factory.mktemp("bu"), BENCHMARK.assets(cfg, data)


def test_rows_mapped_and_scored(run):
    cfg, rows, _, assets = run
    assert len(rows) == 6 * 2 * 2 and all(r["status"] == "ok" for r in rows)
    assert not any(k.startswith("_") for r in rows for k in r)
    prof = [r for r in rows if r["prompt"] == "profile"]
    assert all(r["profile"] == "Loves sci-fi." for r in prof)
    m = BENCHMARK.aggregate(cfg, rows, assets)
    key = "prompt=history,history_shown=10,order=shuffled/"
    # 4 titles, 6 pads: 'A Film ...' and the 6 pads are 0 -> 7 of 10 slots
    assert m[key + "hallucination"] == pytest.approx(0.7)
    assert m[key + "compliance"] == 1.0 and m[key + "unanswered"] == 0.0
    assert "prompt=history,history_shown=10/canddif_hr" in m
    line = BENCHMARK.predictions(rows, assets)[0]
    assert line["ranked"][:4] == [1, 50, 0, 100]  # exact, case-insensitive, hallucinated, exact


def test_contract_files_rescore_to_the_run_metrics(run):
    cfg, rows, tmp, assets = run
    files = BENCHMARK.plots(cfg, rows, tmp / "plots", assets)
    names = {p.name for p in files}
    assert {"items.jsonl", "candidates.jsonl", "position_bias.png"} <= names
    m = BENCHMARK.aggregate(cfg, rows, assets)
    for setting in ("prompt=history__history_shown=10__order=shuffled", "prompt=profile__history_shown=10__order=target_first"):
        got = score_file("beyond-utility", tmp / "predictions" / f"{setting}.jsonl",
                         {"items": str(tmp / "items.jsonl"), "k": cfg.k})["metrics"]
        prefix = setting.replace("__", ",") + "/"
        for k, v in got.items():
            assert (v == "NaN") if v == "NaN" else v == pytest.approx(m[prefix + k]), k
    cands = [json.loads(x) for x in (tmp / "candidates.jsonl").read_text().splitlines()]
    assert len(cands) == 6 and all(len(c["candidates"]) == 20 == len(c["ids"]) for c in cands)
    assert all(c["line"]["target"] in c["ids"] for c in cands)


def test_noncompliant_answers_are_reasked_then_given_up(tmp_path):
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=2, method="first"))
    engine = build_engine({"type": "fake", "default": "I would pick Toy Story."})
    engine.start()
    rows = process_samples(BENCHMARK, cfg, BENCHMARK.build_samples(cfg, data), lambda role: engine, retries=0)
    states = [r["answers"]["rank"] for r in rows]
    assert all(st["attempts"] == cfg.query.max_attempts and st["state"] == "missed" and st["answer"] is None
               and st["texts"] == ["I would pick Toy Story."] * cfg.query.max_attempts for st in states)
    m = BENCHMARK.aggregate(cfg, rows, BENCHMARK.assets(cfg, data))
    assert m["compliance"] == 0.0 and m["unanswered"] == 1.0 and m["hallucination"] == 1.0


def test_history_sweep_plot_and_ks_on_a_baseline_metric(tmp_path):
    import pandas as pd

    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    per_user = tmp_path / "per_user_test.parquet"  # the shape a `llmrec train` run writes
    pd.DataFrame({"user_id": [str(u) for u in range(1, 944)],
                  "ndcg@10": [(u % 7) / 7 for u in range(1, 944)]}).to_parquet(per_user)
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=3, statistic="file", values_path=per_user,
                                                 values_column="ndcg@10"), history_lens=[0, 2])
    engine = build_engine({"type": "fake", "default": REPLY})
    engine.start()
    rows = process_samples(BENCHMARK, cfg, BENCHMARK.build_samples(cfg, data), lambda role: engine, retries=0)
    assert rows[0]["user_draw"]["statistic"] == "file" and rows[0]["user_draw"]["p_value"] > 0.05
    assert {r["template"] for r in rows} == {"no_history", "history"}
    files = BENCHMARK.plots(cfg, rows, tmp_path / "plots", BENCHMARK.assets(cfg, data))
    assert (tmp_path / "plots" / "history_length.png") in files


def test_reranking_pool_keeps_base_set_and_canddif_on_pools_with_target(tmp_path):
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    seqs = {"1": None, "2": None, "3": None}
    probe = BeyondUtilityConfig(users=UserSampling(n_users=None))
    ds = BENCHMARK.assets(probe, data)["dataset"]
    lines = []
    for n, u in enumerate(seqs):
        target = ds.sequences[u][-1]
        pool = [str(i) for i in range(1, 40) if str(i) not in ds.sequences[u]][:19]
        lines.append({"user_id": u, "candidates": ([target] if n < 2 else []) + pool})
    pool_path = tmp_path / "pool.jsonl"
    pool_path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    cfg = BeyondUtilityConfig(task="reranking", pool_path=pool_path, users=UserSampling(n_users=None),
                              orders=["shuffled", "target_first"])
    engine = build_engine({"type": "fake", "default": REPLY})
    engine.start()
    rows = process_samples(BENCHMARK, cfg, BENCHMARK.build_samples(cfg, data), lambda role: engine, retries=0)
    assert len(rows) == 6
    for r in rows:
        assert len(r["base_candidates"]) == 20 and r["base_candidates"][0] == r["target"]  # ranking set kept
        assert (r["target"] in r["candidates"]) == (r["user_id"] != "3")
        if r["order"] == "target_first" and r["user_id"] != "3":
            assert r["candidates"][0] == r["target"]
    m = BENCHMARK.aggregate(cfg, rows, BENCHMARK.assets(cfg, data))
    assert m["target_in_pool"] == pytest.approx(2 / 3) and "canddif_hr" in m  # one pair of orders: plain keys


@pytest.mark.integration  # the CLI verb in its own process
def test_candidates_verb_writes_the_same_users_and_candidates(tmp_path, run):
    import subprocess
    import sys

    import yaml

    data = require_data("ml-100k", "u.data").parents[1]
    cfg, rows, _, _ = run
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"benchmark": cfg.model_dump(mode="json", exclude_unset=True),
                                                     "data": {"dir": str(data)}}))
    res = subprocess.run([sys.executable, "-m", "llmrec.cli", "beyond_utility", "candidates", str(tmp_path / "c.yaml"),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    cands = {json.loads(x)["user_id"]: json.loads(x) for x in (tmp_path / "out" / "candidates.jsonl").read_text().splitlines()}
    shuffled = {r["user_id"]: r["candidates"] for r in rows if r["order"] == "shuffled"}
    assert {u: c["ids"] for u, c in cands.items()} == shuffled  # what the LLM saw, in its order
    assert (tmp_path / "out" / "items.jsonl").is_file()


@pytest.mark.integration  # a fresh process: nothing cached in this one
def test_aggregate_in_a_fresh_process_needs_only_the_assets(run, tmp_path):
    """No module state: a process that never built samples aggregates the stored rows to the same
    metrics from the benchmark's assets alone (before, the catalog lived in a module dict filled by
    build_samples)."""
    import subprocess
    import sys

    cfg, rows, _, assets = run
    data = require_data("ml-100k", "u.data").parents[1]
    (tmp_path / "rows.json").write_text(json.dumps({"cfg": cfg.model_dump(mode="json", exclude_unset=True), "rows": rows}))
    code = ("import json, sys; from pathlib import Path\n"
            "from llmrec.pipelines.benchmarks.beyond_utility import BENCHMARK\n"
            "d = json.loads(Path(sys.argv[1]).read_text()); cfg = BENCHMARK.config_cls(**d['cfg'])\n"
            "print(json.dumps(BENCHMARK.aggregate(cfg, d['rows'], BENCHMARK.assets(cfg, Path(sys.argv[2])))))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "rows.json"), str(data)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    fresh, here = json.loads(res.stdout), BENCHMARK.aggregate(cfg, rows, assets)
    assert fresh.keys() == here.keys()
    assert all(fresh[k] == here[k] or (fresh[k] != fresh[k] and here[k] != here[k]) for k in here)  # NaN == NaN


def test_rows_of_another_catalog_are_refused(run):
    from llmrec.errors import DataError

    cfg, rows, _, assets = run
    with pytest.raises(DataError, match="built from catalog 'other'"):
        BENCHMARK.aggregate(cfg, [dict(rows[0], catalog_key="other")], assets)


def test_paired_outcomes_are_per_user_values_whose_means_are_the_metrics(run):
    cfg, rows, _, assets = run
    m = BENCHMARK.aggregate(cfg, rows, assets)
    outs = BENCHMARK.paired_outcomes(cfg, rows, assets)
    assert {o.metric for o in outs} == {"hr", "ndcg", "serendipity", "hallucination"}
    for o in outs:
        assert o.cluster == next(r["user_id"] for r in rows if r["sample_id"] == o.sample_id)
    for setting in {o.setting for o in outs}:
        for metric in ("hr", "ndcg", "serendipity", "hallucination"):
            values = [o.value for o in outs if o.setting == setting and o.metric == metric]
            assert len(values) == 6 and sum(values) / 6 == pytest.approx(m[f"{setting}/{metric}"])
