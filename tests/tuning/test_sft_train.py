"""`llmrec sft`: a Ray Train job (two workers) on a tiny HF model; killed mid-run, it resumes from its
last checkpoint; per-step loss and the eval loss reach MLflow. The resumed run and the sweep run in this process,
each on a local Ray of its test's own (``own_local_ray``: shut down with every Train actor after the test); only the
run that is killed has a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("peft")

from typer.testing import CliRunner  # noqa: E402

from llmrec.cli import _mount_extra_verbs, app  # noqa: E402
from llmrec.config import validate  # noqa: E402
from llmrec.errors import ConfigError  # noqa: E402
from llmrec.tuning.sft.config import SFTConfig  # noqa: E402
from tests.serving.tiny_hf import build_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _data(path: Path, n: int) -> Path:
    rows = [{"prompt": f"User: colour {i}?\nAssistant:", "completion": " red" if i % 2 else " blue"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _config(tmp_path: Path, steps: int) -> Path:
    cfg = {"base_model": str(build_tiny_model(tmp_path / "base")),
           "data": {"train": str(_data(tmp_path / "train.jsonl", 24)), "valid_fraction": 0.25},
           "lora": {"r": 4, "target_modules": ["q_proj", "v_proj"]},
           "train": {"max_steps": steps, "batch_size": 4, "micro_batch_size": 2, "learning_rate": 1e-3,
                     "checkpoint_every": 5, "eval_every": 10},
           "scaling": {"num_workers": 2, "cpus_per_worker": 0.5, "max_failures": 2},
           "ray": {"num_cpus": 2},
           "tracking": {"experiment": "sft-test", "uri": f"sqlite:///{tmp_path}/mlruns.db",
                        "artifact_root": str(tmp_path / "art")},
           "output": {"dir": str(tmp_path / "runs"), "run_name": "resume"}}
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_config_checks_batch_split():
    with pytest.raises(ConfigError, match="multiple of scaling.num_workers"):
        validate(SFTConfig, {"data": {"train": "x.jsonl"}, "train": {"batch_size": 5}, "scaling": {"num_workers": 2}})


def _registered_step(run: Path) -> int | None:
    """Step of the latest checkpoint Ray Train has registered (its snapshot names it), or None."""
    snap = run / "train" / "checkpoint_manager_snapshot.json"
    try:
        latest = json.loads(snap.read_text()).get("latest_checkpoint_result")
    except (OSError, ValueError):
        return None
    return int(latest["metrics"]["step"]) if latest else None


@pytest.mark.slow
@pytest.mark.model
def test_killed_run_resumes_from_checkpoint(tmp_path, own_local_ray):
    cfg = _config(tmp_path, steps=15)
    run = tmp_path / "runs" / "resume"
    cmd = [sys.executable, "-m", "llmrec.cli", "sft", str(cfg)]
    env = dict(os.environ)  # RAY_TMPDIR stays short: Ray's unix socket paths must fit 107 bytes
    # a process of its own: the point is a kill -9 of the whole run (driver, its Ray, the Train workers) mid-run
    first = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while _registered_step(run) is None and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.5)
        assert _registered_step(run) is not None, "no checkpoint within 300 s"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    killed_at = _registered_step(run)
    assert killed_at < 15 and not (run / "metrics.json").exists()
    # the same config again, in this process (`llmrec sft` through typer's runner) on this test's own local Ray
    if not any(c.name == "sft" for c in app.registered_groups):
        _mount_extra_verbs()
    done = CliRunner().invoke(app, ["sft", str(cfg)])
    assert done.exit_code == 0, (done.output[-3000:], done.exception)
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["steps"] == 15 and summary["resumed"] is True
    assert summary["resumed_from_step"] >= killed_at > 0
    assert (run / "adapter" / "adapter_config.json").is_file()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    loss = client.get_metric_history(summary["mlflow_run_id"], "loss")
    assert {m.step for m in loss} == set(range(1, 16))  # one MLflow run across the kill
    assert {m.step for m in client.get_metric_history(summary["mlflow_run_id"], "valid/loss")} >= {0, 15}
    assert client.get_run(summary["mlflow_run_id"]).info.status == "FINISHED"


@pytest.mark.slow
@pytest.mark.model
def test_sweep_parent_and_child_runs(tmp_path, own_local_ray):
    """`tune:` runs each trial as its own Ray Train job under Ray Tune, MLflow parent + one child per trial."""
    from llmrec.config import load_config
    from llmrec.tuning.sft.sweep import sweep_from_config

    raw = yaml.safe_load(_config(tmp_path, steps=6).read_text())
    raw["scaling"] = {"num_workers": 1, "cpus_per_worker": 1, "max_failures": 2}
    raw["output"]["run_name"] = "sweep"
    raw["tune"] = {"search_space": {"lora.r": {"type": "choice", "values": [2, 4]},
                                    "train.learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2}},
                   "num_samples": 2, "scheduler": {"type": "asha", "grace_period": 3}}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(raw))
    out = sweep_from_config(load_config(SFTConfig, tmp_path / "tune.yaml"))
    assert out["n_trials"] == 2 and out["n_errors"] == 0
    assert set(out["best_config"]) == {"lora.r", "train.learning_rate"} and out["best_value"] > 0
    assert (Path(out["adapter"]) / "adapter_config.json").is_file()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    exp = client.get_experiment_by_name("sft-test").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{out['mlflow_parent_run_id']}'")
    assert len(children) == 2
    assert all(client.get_metric_history(c.info.run_id, "loss") for c in children)
