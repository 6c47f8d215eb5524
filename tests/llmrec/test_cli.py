"""CLI verbs: help on every verb, score contract errors, runs table."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llmrec.cli import app

runner = CliRunner()


@pytest.mark.parametrize("verb", ["run", "serve", "score", "runs", "ui", "data", "train", "tune", "list"])
def test_help(verb):
    res = runner.invoke(app, [verb, "--help"])
    assert res.exit_code == 0 and "Usage" in res.output


def test_score_contract(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in [
        {"sample_id": "a", "gold": "A", "output": "<choice>A</choice>", "extra": 1},
        {"sample_id": "b", "gold": "B", "output": "<choice>C</choice>"},
        {"sample_id": "c", "gold": "C", "output": "???"},
    ]) + "\n")
    out = tmp_path / "m.json"
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p), "--out", str(out)])
    assert res.exit_code == 0, res.output
    m = json.loads(out.read_text())["metrics"]
    assert m["accuracy"] == pytest.approx(1 / 3) and m["missed_rate"] == pytest.approx(1 / 3)


def test_score_errors_name_the_line(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"sample_id": "a", "gold": "A", "output": "x"}) + "\n" + json.dumps({"sample_id": "b"}) + "\n")
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p)])
    assert res.exit_code == 2 and "line 2" in res.output and "gold" in res.output
    p.write_text("{not json}\n")
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p)])
    assert res.exit_code == 2 and "line 1" in res.output
    res = runner.invoke(app, ["score", "nope", "--predictions", str(p)])
    assert res.exit_code == 2 and "prefeval-mcq" in res.output


def test_run_rejects_bad_config_before_work(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text("benchmark: {name: prefeval}\nengine: {type: fake, temprature: 0}\n")
    res = runner.invoke(app, ["run", str(c)])
    assert res.exit_code == 2 and "engine.temprature" in res.output


def test_summary_rows_headline_with_ci_counts_and_failures():
    from llmrec.cli import summary_rows

    metrics = {"accuracy": 0.625, "accuracy_ci_low": 0.4, "accuracy_ci_high": 0.8, "missed_rate": 0.1,
               "failed": 2.0, "over_context": 0.0, "n_samples": 16.0, "n_answered": 14.0, "truncated": 0.0,
               "accuracy.topic.x": 0.5, "mean_prompt_tokens": 300.2}
    stats = {"time_setup_s": 1.2, "samples_new": 16.0, "samples_resumed": 0.0, "engine_calls": 16}
    rows = summary_rows(metrics, stats, ("accuracy", "missed_rate", "failed", "over_context"))
    assert rows == [("accuracy", "0.6250  [0.400, 0.800]"), ("missed_rate", "0.1000"), ("failed", "2"),
                    ("over_context", "0"), ("n_answered", "14"), ("n_samples", "16"), ("truncated", "0"),
                    ("samples_new", "16"), ("samples_resumed", "0")]
    # a benchmark without headline metrics: every metric but the CI bounds, still no timings
    plain = dict(summary_rows(metrics, stats, ()))
    assert "accuracy.topic.x" in plain and "accuracy_ci_low" not in plain and "time_setup_s" not in plain
