"""`llmrec train` with its run directory on a real S3 API (moto server on 127.0.0.1): every file
lands in the bucket, nothing stays on the local disk, and `--resume` continues from the
checkpoint in the bucket exactly where an uninterrupted run would be."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from llmrec import storage
from tests.conftest import ray_stopped, require_data
from tests.runtime.helpers import s3_keys, s3_server
from tests.tuning.helpers import write_config

ML100K = {"data": {"format": "movielens-100k", "path": "ml-100k"},
          "split": {"protocol": "random", "ratios": [0.8, 0.1, 0.1], "seed": 2020},
          "model": {"name": "bprmf", "embedding_size": 16},
          "train": {"epochs": 2, "batch_size": 4096, "learning_rate": 0.005, "patience": 50, "num_threads": 1,
                    "device": "cpu", "progress": False, "eval": {"topk": [10]}},
          "tracking": {"enabled": False}, "output": {"export_topk": 5}}
FILES = ("resolved.yaml", "protocol.json", "metrics.json", "checkpoint/best.pt", "checkpoint/last.pt",
         "per_user_test.parquet", "topk_test.parquet", "embeddings/user_embeddings.parquet",
         "embeddings/item_embeddings.parquet")


@pytest.mark.slow
@pytest.mark.integration
def test_train_on_s3_completes_and_resumes(tmp_path, monkeypatch, caplog):
    from llmrec.cli import app
    from llmrec.errors import ConfigError
    from llmrec.tuning.api import train_from_config

    monkeypatch.setenv("LLMREC_DATA_DIR", str(require_data("ml-100k", "u.data").parents[1]))
    monkeypatch.chdir(tmp_path)
    path = write_config(tmp_path, ML100K)
    with s3_server() as bucket:
        root = f"s3://{bucket}/baselines"
        res = CliRunner().invoke(app, ["train", path, "--set", f"output.dir={root}", "--set", "output.run_name=full"])
        assert res.exit_code == 0, res.output
        keys = set(s3_keys(bucket, "baselines/full/"))
        assert {f"baselines/full/{f}" for f in FILES} <= keys
        full = json.loads(storage.Storage(f"{root}/full").read_text("metrics.json"))
        assert full["run_dir"] == f"{root}/full" and full["checkpoint"] == f"{root}/full/checkpoint/best.pt"
        assert full["topk"] == f"{root}/full/topk_test.parquet" and full["test"]["test/ndcg@10"] > 0
        assert sorted(os.listdir(tmp_path)) == ["cfg.yaml"]  # nothing written to the working directory

        sets = [f"output.dir={root}", "output.run_name=cut"]
        with pytest.raises(ConfigError, match=f"no checkpoint of this config at {root}/cut/checkpoint"):
            train_from_config(path, sets, resume=True)
        first = train_from_config(path, [*sets, "train.epochs=1"])  # a run cut short after epoch 0 ...
        assert first["best_epoch"] == 0
        with caplog.at_level("INFO", logger="llmrec.models.trainer"):
            resumed = train_from_config(path, sets, resume=True)  # ... continued from the bucket's last.pt
        assert "resuming after epoch 0" in caplog.text  # (a fresh temporary folder: it came from S3)
        assert resumed["best_epoch"] == full["best_epoch"]
        assert resumed["test"] == pytest.approx(full["test"])
        assert resumed["valid"] == pytest.approx(full["valid"])
        assert json.loads(storage.Storage(f"{root}/cut").read_text("metrics.json"))["test"] == resumed["test"]

        # `llmrec baselines rank` reuses a trained run straight from the bucket (run_dir: s3://…)
        from llmrec.models.evaluation import evaluate
        from llmrec.pipelines.baselines.rank import load_run

        model, data, tcfg = load_run(f"{root}/full")
        again = evaluate(model, data, "test", tcfg.train.eval).metrics
        assert again["ndcg@10"] == pytest.approx(full["test"]["test/ndcg@10"])
        with pytest.raises(ConfigError, match="not a `llmrec train` run directory"):
            load_run(f"{root}/missing")


@pytest.mark.slow
@pytest.mark.integration
def test_tune_sweep_on_s3_resumes(tmp_path, tiny_csv):
    """output.dir a URI: llmrec's sweep files and (by default) Tune's own state go to the bucket;
    --resume finds both there."""
    from llmrec.tuning.api import tune_from_config
    from tests.tuning.helpers import base_config

    with ray_stopped():  # the sweep starts its own Ray inside the S3 environment (trial workers inherit it)
        with s3_server() as bucket:
            root = f"s3://{bucket}/sweeps"
            cfg = base_config(tmp_path, tracking={"enabled": False},
                              output={"dir": root, "run_name": "s", "export_topk": 0},
                              tune={"num_samples": 1, "resources_per_trial": {"cpu": 1}, "num_cpus": 2,
                                    "search_space": {"train.l2": {"type": "choice", "values": [0.0]}}})
            cfg["train"]["epochs"] = 2
            path = write_config(tmp_path, cfg)
            out = tune_from_config(path, [])
            keys = set(s3_keys(bucket, "sweeps/s/"))
            assert {"sweeps/s/resolved.yaml", "sweeps/s/best.yaml", "sweeps/s/best.json", "sweeps/s/tuner.pkl"} <= keys
            assert out["sweep_dir"] == f"{root}/s" and out["best_config_path"] == f"{root}/s/best.yaml"
            assert json.loads(storage.Storage(f"{root}/s").read_text("best.json"))["best_config"] == {"train.l2": 0.0}
            assert not (tmp_path / "runs").exists()
            again = tune_from_config(path, [], resume=True)
            assert again["best_config"] == out["best_config"] and again["best_value"] == out["best_value"]
