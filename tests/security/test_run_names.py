"""Issue 22: a user-given name that becomes a folder or file name cannot point outside its folder."""

from __future__ import annotations


import pytest
from typer.testing import CliRunner
import yaml

from llmrec.config import validate
from llmrec.cli import app
from llmrec.errors import ConfigError
from llmrec.pipelines.baselines.config import BaselinesConfig
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.tuning.config import TrainConfig
from llmrec.tuning.sft.config import SFTConfig
from tests.pipelines.toy.benchmark import NAME
from tests.tuning.helpers import base_config

ESCAPES = ["../../escaped", "a/b", "/abs/path", "..", ".", "", "a\\b"]


def run_cfg(tmp_path, **output) -> dict:
    return {"benchmark": {"name": NAME, "n": 1}, "engine": {"type": "fake"},
            "output": {"dir": str(tmp_path / "runs"), **output}, "tracking": {"enabled": False}}


@pytest.mark.parametrize("name", ESCAPES)
def test_run_name_must_be_one_folder_name(tmp_path, name):
    with pytest.raises(ConfigError, match=r"'output.run_name': .*single folder/file name"):
        validate(RunConfig, run_cfg(tmp_path, run_name=name))
    with pytest.raises(ConfigError, match=r"'output.run_name': .*single folder/file name"):
        validate(TrainConfig, base_config(tmp_path, output={"run_name": name}))
    with pytest.raises(ConfigError, match=r"'output.run_name': .*single folder/file name"):
        validate(SFTConfig, {"base_model": "embedded", "data": {"train": "t.jsonl"},
                             "output": {"run_name": name}})
    assert validate(RunConfig, run_cfg(tmp_path, run_name="my-run_1.v2")).output.run_name == "my-run_1.v2"


def test_baseline_labels_and_pool_file_stay_inside_out(tmp_path):
    base = {"candidates": "c.jsonl", "base": {}, "out": str(tmp_path / "out"),
            "score_options": {"items": "i.jsonl", "k": 5}}  # the score task's options are checked too
    with pytest.raises(ConfigError, match=r"'models.0.label': .*single folder/file name"):
        validate(BaselinesConfig, {**base, "models": [{"model": {"name": "mostpop"}, "label": "../../x"}]})
    for out in ("../pool.jsonl", "/tmp/pool.jsonl"):
        with pytest.raises(ConfigError, match=r"'pool.out': .*relative path inside its folder"):
            validate(BaselinesConfig, {**base, "models": [{"model": {"name": "mostpop"}}], "pool": {"out": out}})
    ok = validate(BaselinesConfig, {**base, "models": [{"model": {"name": "mostpop"}}],
                                    "pool": {"out": "p/pool.jsonl"}})
    assert str(ok.pool.out) == "p/pool.jsonl"


def test_llmrec_run_refuses_an_escaping_run_name_before_any_work(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(run_cfg(tmp_path)))
    out = CliRunner().invoke(app, ["run", str(cfg), "--set", "output.run_name=../../escaped"])
    assert out.exit_code == 2 and "output.run_name" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()
    assert not (tmp_path / "runs").exists()
