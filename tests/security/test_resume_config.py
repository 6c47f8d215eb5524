"""Issue 22: a run directory's results are resumed only under the config that produced them
(the settings that determine answers); ``--fresh`` starts over."""

from __future__ import annotations


import pytest
from typer.testing import CliRunner
import yaml

from llmrec.cli import app
from llmrec.errors import ConfigError
from llmrec.pipelines.runner.execution import plan
from llmrec.pipelines.runner.run_config import RunConfig
from tests.pipelines.toy.benchmark import NAME


def raw(tmp_path, engine=None, **sections) -> dict:
    return {"benchmark": {"name": NAME, "n": 3}, "engine": engine or {"type": "fake", "default": "yes"},
            "output": {"dir": str(tmp_path / "runs"), "run_name": "shared", **sections.pop("output", {})},
            "tracking": {"enabled": False}, **sections}


def cfg(tmp_path, engine=None, **sections) -> RunConfig:
    return RunConfig.model_validate(raw(tmp_path, engine, **sections))


def finish_one(tmp_path) -> None:
    first = plan(cfg(tmp_path))
    first.store.write([{**first.samples[0], "status": "ok", "error": None, "answer": "yes"}])
    (first.run_dir.local_path / "mlflow_run_id").write_text("old-run")


def test_another_engine_under_the_same_run_name_is_not_resumed(tmp_path):
    finish_one(tmp_path)
    with pytest.raises(ConfigError, match=r"(?s)produced under a different config.*engine.default: 'yes' → 'no'"
                                          r".*--fresh"):
        plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}))
    with pytest.raises(ConfigError, match=r"engine.type: 'fake' → 'openai'"):
        plan(cfg(tmp_path, engine={"type": "openai", "model": "m"}))
    resolved = yaml.safe_load((tmp_path / "runs" / "shared" / "resolved.yaml").read_text())
    assert resolved["engine"]["default"] == "yes"  # still the config the stored answers came from


def test_a_run_whose_every_sample_failed_may_continue_under_a_fixed_engine(tmp_path):
    first = plan(cfg(tmp_path))
    first.store.write([{**s, "status": "failed", "error": "unreachable"} for s in first.samples])
    (tmp_path / "runs" / "shared" / "mlflow_run_id").write_text("old-run")
    fixed = plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}))  # nothing would be resumed: no mixing
    assert len(fixed.pending) == 3
    assert not (tmp_path / "runs" / "shared" / "mlflow_run_id").exists()  # its own MLflow run, its own params


def test_knobs_that_do_not_change_answers_still_resume(tmp_path):
    finish_one(tmp_path)
    p = plan(cfg(tmp_path, execution={"concurrency": 2, "batch_size": 1}, ray={"num_cpus": 1},
                 output={"cache": False}))
    assert len(p.pending) == 2


def test_fresh_starts_over_under_the_new_config(tmp_path):
    finish_one(tmp_path)
    p = plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}, output={"resume": False}))
    assert len(p.pending) == 3 and not p.store.shards()
    assert not (tmp_path / "runs" / "shared" / "mlflow_run_id").exists()  # a new MLflow run, not the old one's params
    resolved = yaml.safe_load((tmp_path / "runs" / "shared" / "resolved.yaml").read_text())
    assert resolved["engine"]["default"] == "no"


def test_a_judge_added_or_an_option_of_another_version_is_compared_sensibly(tmp_path):
    from llmrec.pipelines.runner.run_config import resume_conflicts

    stored = yaml.safe_dump(cfg(tmp_path).model_dump(mode="json"))
    judged = cfg(tmp_path, judge={"type": "fake"})
    assert resume_conflicts(judged, stored) == ["judge: None → a mapping"]
    old = yaml.safe_load(stored)
    del old["engine"]["delay_s"]  # a key the older llmrec did not have: not a difference
    assert resume_conflicts(cfg(tmp_path), yaml.safe_dump(old)) == []


def test_llmrec_run_names_the_differing_keys_in_one_message(tmp_path):
    finish_one(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw(tmp_path, {"type": "fake", "default": "no"})))
    out = CliRunner().invoke(app, ["run", str(path)])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "engine.default: 'yes' → 'no'" in out.output and "--fresh" in out.output
