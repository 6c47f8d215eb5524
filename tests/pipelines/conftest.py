"""Fixtures for runner tests: a run-config writer, the PrefEval data root, a local Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import require_data


def config(tmp_path: Path, name: str = "c.yaml", engine: dict | None = None, **bench) -> Path:
    data = {
        "benchmark": {"name": "prefeval", "topics": ["travel_hotel", "shop_fashion"], "forms": ["explicit", "choice"],
                      "turns": [0, 2], "methods": ["zero-shot", "reminder"], "per_topic": 2, **bench},
        "engine": engine or {"type": "fake", "rules": [{"contains": "Las Vegas", "reply": "<choice>C</choice>"}],
                             "default": "<choice>A</choice>"},
        "execution": {"batch_size": 3, "backoff_s": 0.01},
        "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "mlartifacts")},
    }
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.fixture(scope="module")
def data_root():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
