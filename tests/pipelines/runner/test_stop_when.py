"""execution.stop_when without Ray: the clusters' stratified random order, the sequence fed batch by batch from a
PrefEval MCQ run answered by the fake engine against a pinned (here: a directory) baseline, and its metrics."""

from __future__ import annotations

import pytest

from llmrec.errors import ConfigError
from llmrec.pipelines.common import sequential
from llmrec.pipelines.parts import attach_assets
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.api import unspent
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.stop_when import (EarlyStop, StopWhenConfig, baseline_location, baseline_outcomes,
                                               cluster_order, ordered)
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.pipelines.results.test_gate import BENCH, WRONG, assets, data, prefeval_run  # noqa: F401 - the data fixture

MANY = {**BENCH, "per_topic": 60, "turns": [2, 10]}


def answered(data, wrong: bool, **bench) -> tuple[object, object, list[dict]]:
    cfg = benchmark_config({**BENCH, **bench})
    bench_ = get_benchmark("prefeval")
    samples = attach_assets(bench_.build_samples(cfg, data), assets(cfg, data))
    rules = [{"contains": s["question"], "reply": f"<choice>{WRONG[s['gold']] if wrong else s['gold']}</choice>"}
             for s in samples]
    eng = build_engine({"type": "fake", "rules": rules})
    return bench_, cfg, process_samples(bench_, cfg, samples, lambda role: eng, retries=1, backoff_s=0.0)


def test_clusters_come_whole_in_a_seeded_order_spread_over_settings(data):
    bench, cfg, _ = answered(data, False, per_topic=20, turns=[2, 10])
    samples = get_benchmark("prefeval").build_samples(cfg, data)
    order = cluster_order(bench, samples, seed=3)
    assert sorted(order) == sorted({f"travel_restaurant/{int(s['task_id']):04d}" for s in samples})
    assert order == cluster_order(bench, samples, seed=3) and order != cluster_order(bench, samples, seed=4)
    sent = ordered(bench, samples, order)
    seen = [f"travel_restaurant/{int(s['task_id']):04d}" for s in sent]
    assert [c for i, c in enumerate(seen) if i == 0 or seen[i - 1] != c] == order  # each cluster's samples together


def test_the_sequence_stops_a_clearly_better_run_early_and_says_so(tmp_path, data):
    base = prefeval_run(tmp_path, data, "wrong-always", wrong=10 ** 6, per_topic=60, turns=[2, 10])
    bench, cfg, rows = answered(data, False, per_topic=60, turns=[2, 10])
    sw = StopWhenConfig(against=base, metric="accuracy", margin=0.1)
    assert baseline_location(sw, None, "prefeval") == base
    baseline = baseline_outcomes(bench, cfg, None, base, "accuracy")
    assert len(baseline) == len(rows) and set(baseline.values()) == {0.0}
    stop = EarlyStop.build(sw, bench, cfg, None, rows, baseline)
    by_id = {r["sample_id"]: r for r in rows}
    sent = [by_id[s["sample_id"]] for s in ordered(bench, rows, stop.order)]
    batches = [sent[i:i + 4] for i in range(0, len(sent), 4)]
    for used, batch in enumerate(batches, 1):
        if stop.update(batch):
            break
    assert stop.decided and stop.state.decision == sequential.NOT_WORSE
    assert used < len(batches) / 2  # all right against all wrong: decided on a fraction of the clusters
    assert stop.state.lower > -0.1 and stop.state.estimate == 1.0
    m = stop.metrics(used * 4, len(rows))
    assert m["stop_when/decision"] == 1.0 and m["stop_when/stopped_early"] == 1.0
    assert m["stop_when/share_used"] == used * 4 / len(rows) and m["stop_when/clusters_total"] == len(rows) / 2
    assert "not worse than" in stop.line(used * 4, len(rows)) and "stopped early" in stop.line(used * 4, len(rows))
    # a worse run against the right answers: decided worse
    good = prefeval_run(tmp_path, data, "right-always", per_topic=60, turns=[2, 10])
    _, _, bad_rows = answered(data, True, per_topic=60, turns=[2, 10])
    worse = EarlyStop.build(StopWhenConfig(against=good, metric="accuracy", margin=0.1), bench, cfg, None, bad_rows,
                            baseline_outcomes(bench, cfg, None, good, "accuracy"))
    assert worse.update(bad_rows) and worse.state.decision == sequential.WORSE


def test_config_and_errors(tmp_path, data):
    cfg = RunConfig.model_validate({"benchmark": BENCH, "engine": {"type": "fake"}, "execution": {
        "stop_when": {"against": "prod", "metric": "accuracy", "margin": 0.05}}})
    assert cfg.execution.stop_when.alpha == 0.05
    with pytest.raises(Exception, match="margin"):
        RunConfig.model_validate({"benchmark": BENCH, "engine": {"type": "fake"}, "execution": {
            "stop_when": {"against": "prod", "metric": "accuracy", "margin": -1}}})
    with pytest.raises(ConfigError, match="no MLflow store"):
        baseline_location(StopWhenConfig(against="prod", metric="accuracy", margin=0.1),
                          f"sqlite:///{tmp_path}/none.db", "prefeval")
    bench, cfg, _ = answered(data, False)
    other = prefeval_run(tmp_path, data, "constrained", constrain_choice=True)
    with pytest.raises(ConfigError, match=r"another protocol \(benchmark.constrain_choice True → False\)"):
        baseline_outcomes(bench, cfg, None, other, "accuracy")
    assert unspent({"cost/prompt_tokens": 100.0, "cost/usd": 1.0}, 25, 100) == {
        "cost/unspent/prompt_tokens": 300.0, "cost/unspent/usd": 3.0}


def test_the_leaderboard_marks_an_early_stopped_entry():
    from llmrec.pipelines.results.leaderboard import EARLY, LEGEND, cell

    assert cell("accuracy", 0.5, 0.4, 0.6, 100, 50, early=0.25).endswith(f"{EARLY} 25%")
    assert EARLY not in cell("accuracy", 0.5, 0.4, 0.6, 100, 50) and "stop_when" in LEGEND
