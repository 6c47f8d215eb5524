"""`llmrec reproduce`: a seeded subset of a finished run re-run through the run API with its stored config (request
cache off) into a scratch folder; the report says the provenance first, then the identical calls, the changed
verdicts and the metric's paired difference; exit 0 within --threshold, EXIT_NOT_REPRODUCED beyond it. The toy
benchmark on the fake engine (one local Ray)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from llmrec.exits import EXIT_NOT_REPRODUCED
from llmrec.pipelines.results.reproduce import choose
from llmrec.pipelines.runner.api import run_evaluation
from tests.pipelines.runner.test_runner_toy import run_config

runner = CliRunner()


def mounted():
    if not any(c.name == "reproduce" for c in app.registered_commands):
        _mount_extra_verbs()


def test_choose_is_seeded_and_keeps_stored_order():
    ids = [f"s{i}" for i in range(20)]
    a, b = choose(ids, 5, 3), choose(ids, 5, 3)
    assert a == b and len(a) == 5 and a == [i for i in ids if i in a]
    assert choose(ids, 5, 4) != a and choose(ids, None, 0) == ids and choose(ids, 50, 0) == ids


def test_reproduce_identical_then_differing_outputs(tmp_path, local_ray):
    mounted()
    cfg = run_config(tmp_path, n=6)
    cfg = cfg.model_copy(update={"tracking": cfg.tracking.model_copy(update={"enabled": False})})
    src = run_evaluation(cfg).run_dir
    scratch = tmp_path / "scratch"
    res = runner.invoke(app, ["reproduce", str(src), "--samples", "3", "--seed", "1", "--out", str(scratch)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("provenance: the compared runs were produced by the same")  # first
    assert any(line.startswith("engine calls byte-identical: ") and "(100.0%" in line for line in lines), res.output
    assert "samples whose verdict changed: 0 of 3 (0.0%)" in res.output
    doc = json.loads((scratch / "reproduce.json").read_text())
    assert len(doc["sample_ids"]) == 3 and doc["identical_share"] == 1.0 and doc["calls_total"] >= 3
    assert doc["metrics"] and all(m["diff"] == 0 for m in doc["metrics"])
    # the scratch run holds only the chosen samples, made without the request cache
    again = json.loads((scratch / f"{src.name}-reproduce-seed1" / "metrics.json").read_text())
    assert again  # a complete run directory

    # an engine whose every answer names its process: another process answers otherwise
    cfg2 = run_config(tmp_path / "b", engine={"type": "fake", "context_length": 60, "default": "yes",
                                              "report_pid": True}, n=4)
    cfg2 = cfg2.model_copy(update={"tracking": cfg2.tracking.model_copy(update={"enabled": False})})
    src2 = run_evaluation(cfg2).run_dir
    res = runner.invoke(app, ["reproduce", str(src2), "--samples", "2", "--out", str(tmp_path / "scratch2")])
    assert res.exit_code == EXIT_NOT_REPRODUCED, res.output
    assert "engine calls byte-identical: 0 of" in res.output
    assert "output text differs at character" in res.output and "pid=" in res.output  # each differing call named
    res = runner.invoke(app, ["reproduce", str(src2), "--samples", "2", "--threshold", "0",
                              "--out", str(tmp_path / "scratch3")])
    assert res.exit_code == 0, res.output


def test_a_suite_entry_is_picked_by_entry(tmp_path):
    import pytest

    from llmrec.errors import ConfigError
    from llmrec.pipelines.results.reproduce import pick_run
    from tests.pipelines.runner.test_compare import NAME, fake_run

    a, b = fake_run(tmp_path, "a", "no"), fake_run(tmp_path, "b", "yes")
    suite = tmp_path / "suite"
    suite.mkdir()
    entries = [{"subject": s, "benchmark": NAME, "entry": "toy", "kind": "llm", "run_dir": d, "headline": ["accuracy"],
                "mlflow_run_id": None} for s, d in (("m1", a), ("m2", b))]
    (suite / "suite.json").write_text(json.dumps({"name": "s", "subjects": ["m1", "m2"], "entries": entries}))
    with pytest.raises(ConfigError, match="2 runs .*pick one with --entry"):
        pick_run(str(suite), None)
    assert str(pick_run(str(suite), "m2/toy").path) == b
    with pytest.raises(ConfigError, match="--entry nope: no LLM run"):
        pick_run(str(suite), "nope")
