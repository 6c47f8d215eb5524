"""``train_from_config`` end to end on a tiny CSV, tracked in a sqlite MLflow store in tmp_path."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.tuning.helpers import base_config, write_config
from llmrec.tuning.api import train_from_config


@pytest.mark.slow  # MLflow's sqlite schema migration alone takes ~15 s here
@pytest.mark.integration
def test_train_writes_outputs_and_one_mlflow_run(tmp_path, tiny_csv):
    path = write_config(tmp_path, base_config(tmp_path))
    out = train_from_config(path, ["train.epochs=2"])
    run_dir = tmp_path / "runs" / out["run_dir"].split("/")[-1]
    for name in (
        "resolved.yaml",
        "protocol.json",
        "metrics.json",
        "checkpoint/best.pt",
        "per_user_test.parquet",
        "topk_test.parquet",
        "embeddings/user_embeddings.parquet",
    ):
        assert (run_dir / name).is_file(), name
    protocol = json.loads((run_dir / "protocol.json").read_text())
    assert protocol["protocol"] == "loo" and protocol["candidates"]["mode"] == "full" and protocol["n_test"] == 24
    per_user = pd.read_parquet(run_dir / "per_user_test.parquet")
    assert len(per_user) == 24 and per_user["ndcg@10"].mean() == pytest.approx(out["test"]["test/ndcg@10"])

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    exp = client.get_experiment_by_name("test")
    assert exp.artifact_location.endswith("artifacts")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["model.embedding_size"] == "8" and run.data.params["protocol.protocol"] == "loo"
    history = client.get_metric_history(run.info.run_id, "valid/ndcg_at_10")
    assert [m.step for m in history] == [0, 1]
    assert run.data.metrics["test/ndcg_at_10"] == pytest.approx(out["test"]["test/ndcg@10"])
    assert not any("secret" in k or "key" in k.lower() for k in run.data.params if not k.startswith("data.columns"))


def test_sampled_candidates_mode_is_recorded(tmp_path, tiny_csv):
    cfg = base_config(tmp_path, tracking={"enabled": False})
    cfg["split"]["candidates"] = {"mode": "sampled", "num_negatives": 5}
    cfg["model"] = {"name": "mostpop"}
    out = train_from_config(write_config(tmp_path, cfg), [])
    assert out["protocol"]["candidates"] == {"mode": "sampled", "num_negatives": 5, "seed": 2020,
                                             "sampler": "uniform"}
    assert out["mlflow_run_id"] is None and "embeddings" in out and out["embeddings"] == {}
    assert 0 < out["test"]["test/hr@5"] <= 1
    # the candidate lists are exported, and validation and test draw their own negatives
    valid, test = pd.read_parquet(out["candidates_valid"]), pd.read_parquet(out["candidates_test"])
    assert len(test) == 24 and all(len(n) == 5 for n in test["negatives"])
    both = valid.merge(test, on="user_id", suffixes=("_v", "_t"))
    assert any(list(a) != list(b) for a, b in zip(both["negatives_v"], both["negatives_t"]))
    assert all(not set(p) & set(n) for p, n in zip(test["positives"], test["negatives"]))


def test_history_masking_and_tie_break_are_recorded(tmp_path, tiny_csv):
    cfg = base_config(tmp_path, tracking={"enabled": False})
    cfg["model"] = {"name": "mostpop"}
    out = train_from_config(write_config(tmp_path, cfg), [])
    assert out["protocol"]["exclude_history"] is True and out["protocol"]["exclude_history_from"].startswith("family")
    cfg["train"] = {**cfg.get("train", {}), "eval": {"exclude_history": False}}
    again = train_from_config(write_config(tmp_path, cfg), [])
    assert again["protocol"]["exclude_history"] is False and again["protocol"]["exclude_history_from"] == "config"
    assert "seeded random" in again["protocol"]["tie_break"]


def test_sequential_models_refuse_the_random_split(tmp_path, tiny_csv):
    from llmrec.errors import ConfigError

    for name in ("sasrec", "gru4rec"):
        cfg = base_config(tmp_path, tracking={"enabled": False})
        cfg["split"]["protocol"] = "random"
        cfg["model"] = {"name": name}
        with pytest.raises(ConfigError, match=r"split.protocol: loo or temporal"):
            train_from_config(write_config(tmp_path, cfg), [])


def test_sequence_training_samples_are_recorded(tmp_path, tiny_csv):
    cfg = base_config(tmp_path, tracking={"enabled": False})
    cfg["model"] = {"name": "gru4rec", "embedding_size": 8, "hidden_size": 8, "max_seq_len": 4}
    cfg["train"]["epochs"] = 1
    out = train_from_config(write_config(tmp_path, cfg), [])
    assert out["protocol"]["model"]["train_samples"] == "prefix" and "RecBole" in out["protocol"]["model"][
        "train_samples_rule"]
    written = json.loads((tmp_path / "runs" / out["run_dir"].split("/")[-1] / "protocol.json").read_text())
    assert written["model"] == out["protocol"]["model"]
    windows = train_from_config(write_config(tmp_path, cfg), ["model.train_samples=windows"])
    assert windows["protocol"]["model"]["train_samples"] == "windows" and windows["protocol"]["model"][
        "train_stride"] == 1
    assert {k: v for k, v in windows["protocol"].items() if k != "model"} == {
        k: v for k, v in out["protocol"].items() if k != "model"}


def test_train_resume_continues_after_the_last_epoch(tmp_path, tiny_csv):
    from llmrec.errors import ConfigError

    cfg = base_config(tmp_path, tracking={"enabled": False})
    path = write_config(tmp_path, cfg)
    with pytest.raises(ConfigError, match="--resume: no checkpoint"):
        train_from_config(path, ["train.epochs=3"], resume=True)
    first = train_from_config(path, ["train.epochs=3", "train.patience=50"])
    assert (tmp_path / "runs" / first["run_dir"].split("/")[-1] / "checkpoint" / "last.pt").is_file()
    # the same config (same run dir) with a larger budget: resuming trains epochs 3.. only
    second = train_from_config(path, ["train.epochs=3", "train.patience=50"], resume=True)
    assert second["best_epoch"] == first["best_epoch"] and second["test"] == first["test"]


def test_relative_output_dir_is_made_absolute_on_the_driver(tmp_path, tiny_csv, monkeypatch):
    cfg = base_config(tmp_path, tracking={"enabled": False}, output={"dir": "rel/runs", "run_name": "r"})
    cfg["train"]["epochs"] = 1
    path = write_config(tmp_path, cfg)
    monkeypatch.chdir(tmp_path)
    out = train_from_config(path, [])
    assert out["run_dir"] == str(tmp_path / "rel" / "runs" / "r")
    resolved = yaml.safe_load((tmp_path / "rel" / "runs" / "r" / "resolved.yaml").read_text())
    assert resolved["output"]["dir"] == str(tmp_path / "rel" / "runs")
    assert not [p for p in (tmp_path / "rel" / "runs" / "r").iterdir() if p.name.startswith(".")]  # no temporaries
