"""execution.stop_when end to end on a local Ray with the fake engine: a PrefEval MCQ run that answers right,
against a baseline that answers wrong, stops early with "not worse", writes its metrics as complete-but-early
(decision, bounds, share used; what was not spent), and a re-run without stop_when resumes to the full set."""

from __future__ import annotations

import json

import pytest

from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.rundir import RunDir
from tests.pipelines.results.test_gate import BENCH, data, prefeval_run  # noqa: F401 - the data fixture

pytestmark = [pytest.mark.slow, pytest.mark.integration]
ALL = {**BENCH, "per_topic": 56}


def test_a_clearly_better_run_stops_early_and_resumes_to_the_full_set(tmp_path, data, local_ray):
    base = prefeval_run(tmp_path, data, "wrong-always", wrong=10 ** 6, per_topic=56)
    samples = get_benchmark("prefeval").build_samples(benchmark_config(ALL), data)
    rules = [{"contains": s["question"], "reply": f"<choice>{s['gold']}</choice>"} for s in samples]

    def cfg(stop: bool) -> RunConfig:
        ex = {"batch_size": 1, "concurrency": 1, "backoff_s": 0.01,
              **({"stop_when": {"against": base, "metric": "accuracy", "margin": 0.1}} if stop else {})}
        return RunConfig.model_validate({
            "benchmark": ALL, "engine": {"type": "fake", "model": "right", "rules": rules}, "execution": ex,
            "ray": {"num_cpus": 2}, "data": {"dir": str(data)},
            "output": {"dir": str(tmp_path / "runs"), "run_name": "candidate"}, "tracking": {"enabled": False}})

    early = run_evaluation(cfg(True), data)
    n = len(samples)
    assert early.metrics["stop_when/decision"] == 1.0 and early.metrics["stop_when/stopped_early"] == 1.0
    assert early.metrics["n_samples"] < n / 2 and early.metrics["stop_when/share_used"] < 0.5
    assert early.metrics["stop_when/lower"] > -0.1
    assert "not worse than" in early.stop_line and "stopped early" in early.stop_line
    stored = json.loads((early.run_dir / RunDir.METRICS).read_text())
    assert stored["stop_when/decision"] == 1.0 and "cost/unspent/prompt_tokens" in stored
    assert stored["cost/unspent/prompt_tokens"] > stored["cost/prompt_tokens"]  # most of the set was not run

    from llmrec.pipelines.results.leaderboard import EARLY, leaderboard, wide

    board = leaderboard([early.run_dir])
    share = early.metrics["stop_when/share_used"]
    assert board["stopped_early_share"].iloc[0] == share
    assert f"{EARLY} {share:.0%}" in wide(board).iloc[0, 2]  # the leaderboard marks the early-stopped entry

    full = run_evaluation(cfg(False), data)
    assert full.metrics["n_samples"] == n and full.stats["samples_resumed"] == early.metrics["n_samples"]
    assert not any(k.startswith("stop_when/") for k in full.metrics)
