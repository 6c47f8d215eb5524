"""End to end: `llmrec run configs/lrworld_demo.yaml` (cut to one sample per measure) with the
embedded llama.cpp model on the tests' shared local Ray, then `llmrec score lrworld` on its predictions (both verbs
through typer's runner, in this process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmrec.cli import app
from tests.conftest import require_data

pytestmark = [pytest.mark.slow, pytest.mark.model]
REPO = Path(__file__).resolve().parents[4]


def test_demo_config_end_to_end(tmp_path, monkeypatch, local_ray):
    pytest.importorskip("llama_cpp")
    root = require_data("ml-100k", "u.data").parent.parent
    monkeypatch.setenv("LLMREC_DATA_DIR", str(root))
    monkeypatch.chdir(tmp_path)
    sets = ["benchmark.build.per_measure=1", "benchmark.variants=[base]", "engine.n_threads=1",  # tests/conftest.py
            "benchmark.build.factors=[memory_item_item,memory_user_user,entity_attribute]",
            f"output.dir={tmp_path / 'runs'}", f"tracking.uri=sqlite:///{tmp_path / 'mlruns.db'}",
            f"tracking.artifact_root={tmp_path / 'art'}"]
    cmd = ["run", str(REPO / "configs" / "lrworld_demo.yaml")]
    for s in sets:
        cmd += ["--set", s]
    res = CliRunner().invoke(app, cmd)
    assert res.exit_code == 0, (res.output[-3000:], res.exception)
    run_dir = next((tmp_path / "runs").glob("lrworld-*"))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["base/n"] == 4.0  # item-item, user-user, genres, decade: one each
    assert 0.0 <= metrics["base/accuracy"] <= 1.0 and metrics["base/missed_rate"] == 0.0  # constrained labels
    lines = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert {x["measure"] for x in lines} == {"memory_item_item/ml-100k/item", "memory_user_user/ml-100k/user",
                                            "entity_attribute/ml-100k/genres", "entity_attribute/ml-100k/decade"}
    scored = CliRunner().invoke(app, ["score", "lrworld", "--predictions", str(run_dir / "predictions.jsonl"),
                                      "--out", str(tmp_path / "m.json")])
    assert scored.exit_code == 0, (scored.output, scored.exception)
    again = json.loads((tmp_path / "m.json").read_text())["metrics"]
    assert again["base/accuracy"] == metrics["base/accuracy"]
    assert (run_dir / "plots" / "lrworld_factors.png").is_file()
