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
