"""End to end: `llmrec run configs/lrworld_demo.yaml` (cut to one sample per measure) with the
embedded llama.cpp model on a local Ray, then `llmrec score lrworld` on its predictions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_data

pytestmark = [pytest.mark.slow, pytest.mark.model]
REPO = Path(__file__).resolve().parents[4]


def test_demo_config_end_to_end(tmp_path):
    pytest.importorskip("llama_cpp")
    root = require_data("ml-100k", "u.data").parent.parent
    env = {**os.environ, "LLMREC_DATA_DIR": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    sets = ["benchmark.build.per_measure=1", "benchmark.variants=[base]",
            "benchmark.build.factors=[memory_item_item,memory_user_user,entity_attribute]",
            f"output.dir={tmp_path / 'runs'}", f"tracking.uri=sqlite:///{tmp_path / 'mlruns.db'}",
            f"tracking.artifact_root={tmp_path / 'art'}"]
    cmd = [sys.executable, "-m", "llmrec.cli", "run", str(REPO / "configs" / "lrworld_demo.yaml")]
    for s in sets:
        cmd += ["--set", s]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run_dir = next((tmp_path / "runs").glob("lrworld-*"))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["base/n"] == 4.0  # item-item, user-user, genres, decade: one each
    assert 0.0 <= metrics["base/accuracy"] <= 1.0 and metrics["base/missed_rate"] == 0.0  # constrained labels
    lines = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert {x["measure"] for x in lines} == {"memory_item_item/ml-100k/item", "memory_user_user/ml-100k/user",
                                            "entity_attribute/ml-100k/genres", "entity_attribute/ml-100k/decade"}
    scored = subprocess.run([sys.executable, "-m", "llmrec.cli", "score", "lrworld", "--predictions",
                             str(run_dir / "predictions.jsonl"), "--out", str(tmp_path / "m.json")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert scored.returncode == 0, scored.stdout + scored.stderr
    again = json.loads((tmp_path / "m.json").read_text())["metrics"]
    assert again["base/accuracy"] == metrics["base/accuracy"]
    assert (run_dir / "plots" / "lrworld_factors.png").is_file()
