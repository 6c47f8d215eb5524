"""Ray Tune integration: 2 tiny trials on a local Ray, MLflow parent/child runs in sqlite, resume."""

from __future__ import annotations

import json

import pytest
import yaml
from mlflow.tracking import MlflowClient

from llmrec.errors import ConfigError
from tests.tuning.helpers import base_config, write_config
from tuning.api import tune_from_config


@pytest.mark.slow
def test_two_trials_log_parent_and_children_then_resume(tmp_path, tiny_csv, local_ray):
    cfg = base_config(
        tmp_path,
        tune={
            "num_samples": 2,
            "max_concurrent": 2,
            "resources_per_trial": {"cpu": 1},
            "scheduler": {"type": "asha", "grace_period": 1},
            "search_space": {
                "train.learning_rate": {"type": "loguniform", "low": 0.005, "high": 0.1},
                "model.embedding_size": {"type": "choice", "values": [4, 8]},
            },
        },
    )
    path = write_config(tmp_path, cfg)
    out = tune_from_config(path, [])

    assert out["n_trials"] == 2 and out["n_errors"] == 0
    assert set(out["best_config"]) == {"train.learning_rate", "model.embedding_size"}
    assert (
        (tmp_path / "runs").is_dir()
        and out["checkpoint"]
        and (json.loads(open(out["sweep_dir"] + "/best.json").read())["metric"] == "valid/ndcg@10")
    )
    best = yaml.safe_load(open(out["best_config_path"]))
    assert best["model"]["embedding_size"] == out["best_config"]["model.embedding_size"] and "tune" not in best

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    exp = client.get_experiment_by_name("test")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == out["mlflow_parent_run_id"]]
    assert len(parents) == 1 and parents[0].info.run_id == out["mlflow_parent_run_id"] and len(children) == 2
    assert parents[0].data.params["tune.num_samples"] == "2" and "best/valid/ndcg_at_10" in parents[0].data.metrics
    for child in children:
        assert child.info.status == "FINISHED"
        assert set(child.data.params) == {"train.learning_rate", "model.embedding_size"}
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "valid/ndcg_at_10")]
        assert steps[:1] == [1] and steps == sorted(steps)
    finished = [c for c in children if "test/ndcg_at_10" in c.data.metrics]
    assert finished, "at least the trial ASHA kept reports final test metrics"

    with pytest.raises(ConfigError, match="a sweep already exists"):
        tune_from_config(path, [])
    again = tune_from_config(path, [], resume=True)
    assert again["best_config"] == out["best_config"] and again["mlflow_parent_run_id"] == out["mlflow_parent_run_id"]
    assert len(client.search_runs([exp.experiment_id])) == 3


def test_resume_without_a_sweep_fails(tmp_path, tiny_csv):
    cfg = base_config(tmp_path, tune={"search_space": {"train.l2": {"type": "choice", "values": [0.0]}}})
    with pytest.raises(ConfigError, match="--resume: no sweep to resume"):
        tune_from_config(write_config(tmp_path, cfg), [], resume=True)
