"""Config builders shared by the tuning tests."""

from __future__ import annotations

from pathlib import Path

import yaml


def base_config(tmp_path: Path, **extra) -> dict:
    cfg = {
        "data": {
            "format": "csv",
            "path": "inter.csv",
            "dir": str(tmp_path / "data"),
            "columns": {"user_id": "uid", "item_id": "iid", "rating": "r", "timestamp": "ts"},
        },
        "split": {"protocol": "loo"},
        "model": {"name": "bprmf", "embedding_size": 8},
        "train": {
            "epochs": 3,
            "batch_size": 64,
            "learning_rate": 0.05,
            "num_threads": 1,
            "device": "cpu",
            "eval": {"topk": [5, 10]},
        },
        "tracking": {
            "uri": f"sqlite:///{tmp_path / 'mlruns.db'}",
            "artifact_root": str(tmp_path / "artifacts"),
            "experiment": "test",
        },
        "output": {"dir": str(tmp_path / "runs"), "export_topk": 5},
    }
    cfg.update(extra)
    return cfg


def write_config(tmp_path: Path, cfg: dict, name: str = "cfg.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return str(path)
