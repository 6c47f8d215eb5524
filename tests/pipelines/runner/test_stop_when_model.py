"""execution.stop_when with the real embedded model (Gemma 3 270M via llama.cpp) on a local Ray: against a pinned
baseline that always picks a wrong option, a PrefEval MCQ run stops before the full set with "not worse"."""

from __future__ import annotations

import pytest

from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import RunConfig
from tests.pipelines.results.test_gate import BENCH, data, prefeval_run  # noqa: F401 - the data fixture

pytestmark = [pytest.mark.slow, pytest.mark.model]
pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'cpu') is not installed")

# the embedded 270M base model needs closed choices (as configs/prefeval_mcq_demo.yaml)
MCQ = {**BENCH, "per_topic": 56, "constrain_choice": True, "answer_max_tokens": 16, "pref_reply_max_tokens": 16}
# the non-inferiority margin: wide, so that the decision comes after few of the real model's samples (each one
# is this test's time): at 0.5 "not worse" came after 14 of the 56 clusters (28 engine calls), at 0.1 after 28 (55)
MARGIN = 0.5


def test_a_real_model_stops_early_against_a_baseline_that_is_always_wrong(tmp_path, data, local_ray):
    base = prefeval_run(tmp_path, data, "always-wrong", wrong=10 ** 6, **{k: v for k, v in MCQ.items() if k != "name"})
    cfg = RunConfig.model_validate({
        "benchmark": MCQ, "engine": {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1, "choice_mode": "score"},
        "execution": {"batch_size": 1, "concurrency": 1,
                      "stop_when": {"against": base, "metric": "accuracy", "margin": MARGIN}},
        "ray": {"num_cpus": 2}, "data": {"dir": str(data)},
        "output": {"dir": str(tmp_path / "runs"), "run_name": "gemma"}, "tracking": {"enabled": False}})
    out = run_evaluation(cfg, data)
    assert out.metrics["stop_when/decision"] == 1.0 and out.metrics["stop_when/stopped_early"] == 1.0
    assert out.metrics["n_samples"] < 56 and out.metrics["stop_when/lower"] > -MARGIN
    assert "not worse than" in out.stop_line and "stopped early" in out.stop_line
