"""Ray Tune integration: 2 tiny trials on a local Ray, MLflow parent/child runs in sqlite, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from llmrec.errors import ConfigError
from tests.tuning.helpers import base_config, write_config
from llmrec.tuning.api import tune_from_config


@pytest.mark.slow
@pytest.mark.integration
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


def _write_csv(path, n_users: int, per_user: int, n_items: int) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(1)
    rows = [
        (f"u{u}", f"i{i}", 1.0, t)
        for u in range(n_users)
        for t, i in enumerate(rng.choice(n_items, size=per_user, replace=False))
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["uid", "iid", "r", "ts"]).to_csv(path, index=False)


@pytest.mark.slow
@pytest.mark.integration
def test_sweep_killed_mid_run_resumes_without_losing_or_repeating_trials(tmp_path, local_ray):
    """kill -9 the whole `llmrec tune` process group while trial 1 trains and trial 2 waits;
    the resume (`llmrec tune --resume`'s ``tune_from_config(resume=True)``) finishes both, continuing trial 1 from
    its checkpoint, under the same MLflow parent with one child per trial. The killed sweep is a process of its own
    (kill -9 needs one); the resume runs here, on the shared local Ray (it reads the sweep's state from its folder)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    _write_csv(tmp_path / "data" / "inter.csv", n_users=300, per_user=40, n_items=200)
    epochs = 12
    cfg = base_config(
        tmp_path,
        train={"epochs": epochs, "batch_size": 32, "learning_rate": 0.01, "patience": 100, "num_threads": 1,
               "device": "cpu", "eval": {"topk": [10]}},
        tune={
            "num_samples": 2,
            "max_concurrent": 1,
            "num_cpus": 1,
            "resources_per_trial": {"cpu": 1},
            "scheduler": {"type": "fifo"},
            "search_space": {"model.embedding_size": {"type": "choice", "values": [8, 16]}},
        },
    )
    path = write_config(tmp_path, cfg)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def tune():
        return subprocess.Popen([sys.executable, "-m", "llmrec.cli", "tune", path], cwd=repo, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")

    def children():
        exp = client.get_experiment_by_name("test")
        runs = client.search_runs([exp.experiment_id]) if exp else []
        return [r for r in runs if "mlflow.parentRunId" in r.data.tags]

    proc = tune()
    deadline, killed_at = time.time() + 300, None
    while time.time() < deadline and proc.poll() is None:
        # a few epochs of trial 1 are logged and checkpointed, trial 2 has not started
        kids = children()
        steps = [m.step for m in client.get_metric_history(kids[0].info.run_id, "valid/ndcg_at_10")] if kids else []
        if len(kids) == 1 and len(steps) >= 3 and list((tmp_path / "runs").glob("tune-*/trials/*/checkpoint/last.pt")):
            killed_at = max(steps)
            break
        time.sleep(0.3)
    assert killed_at is not None, proc.communicate()[0].decode()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert killed_at < epochs and len(children()) == 1

    resumed = tune_from_config(path, [], resume=True)
    best = json.loads(next((tmp_path / "runs").glob("tune-*/best.json")).read_text())
    assert best["mlflow_parent_run_id"] == resumed["mlflow_parent_run_id"]
    assert best["n_trials"] == 2 and best["n_errors"] == 0 and best["test"]
    assert Path(best["checkpoint"]).is_file() and best["checkpoint"].endswith("/checkpoint/best.pt")
    # trials keep llmrec's checkpoints, never Tune's: Tune deletes a trial's older checkpoint before its
    # experiment state names the newer one, and a sweep killed in that window could not be restored
    assert not list((tmp_path / "runs").glob("tune-*/tune_trial_*/checkpoint_*"))
    kids = children()
    assert len(kids) == 2 and {k.data.tags["mlflow.parentRunId"] for k in kids} == {best["mlflow_parent_run_id"]}
    for kid in kids:
        assert kid.info.status == "FINISHED" and "test/ndcg_at_10" in kid.data.metrics
        steps = [m.step for m in client.get_metric_history(kid.info.run_id, "valid/ndcg_at_10")]
        # every epoch logged, and none started over: epoch 1 appears once in each trial
        assert set(steps) == set(range(1, epochs + 1)) and steps.count(1) == 1, steps
    parents = [r for r in client.search_runs([kids[0].info.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"


@pytest.mark.slow
@pytest.mark.integration
def test_tune_state_goes_to_storage_path(tmp_path, tiny_csv, local_ray):
    """tune.storage_path (a folder or URI) holds Tune's state; resume finds the sweep there."""
    cfg = base_config(tmp_path, tune={"num_samples": 1, "resources_per_trial": {"cpu": 1},
                                      "storage_path": str(tmp_path / "tune-state"),
                                      "search_space": {"train.l2": {"type": "choice", "values": [0.0]}}})
    path = write_config(tmp_path, cfg)
    out = tune_from_config(path, [])
    name = out["sweep_dir"].rsplit("/", 1)[-1]
    assert (tmp_path / "tune-state" / name / "tuner.pkl").is_file()
    assert not (Path(out["sweep_dir"]) / "tuner.pkl").exists()  # llmrec files stay in the sweep dir
    again = tune_from_config(path, [], resume=True)
    assert again["best_config"] == out["best_config"]
