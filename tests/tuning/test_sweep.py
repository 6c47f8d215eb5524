"""The one sweep module (tuning/sweep.py) shared by `llmrec tune` and `llmrec sft`: best result,
summary, parent-run status, scheduler; and the one tracking section with a per-kind experiment."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llmrec import tracking
from llmrec.config import validate
from llmrec.errors import ConfigError
from llmrec.tuning import sweep
from llmrec.tuning.config import TrainConfig
from llmrec.tuning.sft.config import SFTConfig
from tests.tuning.helpers import base_config


class Grid(list):
    """A ResultGrid stand-in: trials, their errors, and the best result (or none reported)."""

    def __init__(self, n: int, errors: list[str], best=None):
        super().__init__(range(n))
        self.errors, self.best = errors, best

    def get_best_result(self, metric, mode, scope):
        if self.best is None:
            raise RuntimeError("No best trial found")
        return self.best


def test_no_trial_reporting_the_metric_is_a_config_error_naming_the_sweep():
    with pytest.raises(ConfigError, match=r"no trial of the sweep at /s reported 'valid/loss'; 2 trial\(s\) failed"):
        sweep.best_result(Grid(2, ["boom", "bang"]), "valid/loss", "min", "last", "/s")


def test_summary_keeps_the_callers_fields_between_best_config_and_counts():
    best = SimpleNamespace(config={"lr": 0.1})
    out = sweep.summary("/s", "m", 0.5, best, Grid(3, ["x"]), {"run_id": "r1"}, adapter="/a")
    assert list(out) == ["sweep_dir", "metric", "best_value", "best_config", "adapter", "n_trials", "n_errors",
                         "mlflow_parent_run_id"]
    assert (out["n_trials"], out["n_errors"], out["mlflow_parent_run_id"]) == (3, 1, "r1")


@pytest.mark.parametrize("n_trials,n_errors,status", [(3, 0, "FINISHED"), (3, 2, "FINISHED"), (3, 3, "FAILED")])
def test_parent_run_fails_only_when_every_trial_failed(tmp_path, n_trials, n_errors, status):
    cfg = tracking.TrackingConfig(uri=f"sqlite:///{tmp_path}/m.db", artifact_root=str(tmp_path / "art"),
                                  experiment="sweeps")
    parent = sweep.start_parent(cfg, ("best/m",), "tune", "s", {"a": 1}, {}, None, str(tmp_path))
    (tmp_path / "best.json").write_text("{}")
    out = {"n_trials": n_trials, "n_errors": n_errors}
    sweep.close_parent(cfg.uri, parent, out, {"best/m": 0.5, "best/none": None}, [tmp_path / "best.json"],
                       {"llmrec.best_trial": "t1"})
    run = tracking.client(cfg.uri).get_run(parent["run_id"])
    assert run.info.status == status and run.data.metrics == {"best/m": 0.5}
    assert run.data.tags["llmrec.best_trial"] == "t1"
    assert sweep.start_parent(cfg.model_copy(update={"enabled": False}), (), "tune", "s", {}, {}, None, "") is None


def test_scheduler_choice():
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    assert isinstance(sweep.SchedulerConfig(type="fifo").build("epoch", 5), FIFOScheduler)
    asha = sweep.SchedulerConfig(grace_period=3).build("step", 10)
    assert isinstance(asha, ASHAScheduler) and asha._time_attr == "step" and asha._max_t == 10
    assert sweep.SchedulerConfig(max_t=4).build("epoch", 10)._max_t == 4


def test_one_scheduler_and_one_output_shape_for_every_run_stack():
    """tune and sft sweeps take the same scheduler section; run, train/tune and sft the same output keys."""
    from llmrec.config import OutputBase
    from llmrec.pipelines.runner.run_config import OutputConfig as RunOutput
    from llmrec.tuning.config import OutputConfig as TrainOutput, TuneSection
    from llmrec.tuning.sft.config import OutputSection as SFTOutput, SFTTuneSection

    assert TuneSection.model_fields["scheduler"].annotation is SFTTuneSection.model_fields["scheduler"].annotation
    for out in (RunOutput, TrainOutput, SFTOutput):
        assert issubclass(out, OutputBase) and {"dir", "run_name"} <= set(out.model_fields)
    assert (RunOutput().dir, TrainOutput().dir, SFTOutput().dir) == ("runs", "runs/baselines", "runs/sft")


def test_one_tracking_section_with_the_kinds_default_experiment(tmp_path):
    cfg = validate(TrainConfig, {**base_config(tmp_path), "tracking": {"uri": "sqlite:///x.db"}})
    assert cfg.tracking.experiment == "llmrec-baselines" and type(cfg.tracking) is tracking.TrackingConfig
    bare = {k: v for k, v in base_config(tmp_path).items() if k != "tracking"}
    assert validate(TrainConfig, bare).tracking.experiment == "llmrec-baselines"
    sft = validate(SFTConfig, {"data": {"train": str(tmp_path / "t.jsonl")}, "tracking": {"experiment": None}})
    assert sft.tracking.experiment == "llmrec-sft" and type(sft.tracking) is tracking.TrackingConfig
    with pytest.raises(ConfigError, match="tracking.experimnt"):
        validate(TrainConfig, {**base_config(tmp_path), "tracking": {"experimnt": "x"}})
