"""End to end: `llmrec run` of the probe on ML-100K items with the fake engine on the tests' local Ray, the engine
knowing every other item: the run directory's metrics give coverage 0.5 with a CI and per popularity bucket."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.cli import app
from llmrec.pipelines.benchmarks.memorization import BENCHMARK
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig
from tests.conftest import require_data

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_llmrec_run_reports_coverage_with_a_ci_and_per_bucket(tmp_path, local_ray):
    data = require_data("ml-100k", "u.data").parent.parent
    bench = {"name": "memorization", "catalogue": "ml-100k", "items": 20, "seed": 0}
    rows = BENCHMARK.build_samples(MemorizationConfig(**bench), data)
    rules = [{"contains": f"Input: {r['key']}|", "reply": f"{r['key']}|{r['gold']}"} for r in rows[::2]]
    raw = {"benchmark": bench, "engine": {"type": "fake", "default": "Unknown", "rules": rules},
           "data": {"dir": str(data)}, "output": {"dir": str(tmp_path / "runs"), "run_name": "probe"},
           "tracking": {"enabled": False}, "execution": {"concurrency": 1, "batch_size": 8}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["run", str(path)])
    assert res.exit_code == 0, res.output
    run_dir = tmp_path / "runs" / "probe"
    m = json.loads((run_dir / "metrics.json").read_text())
    m = m.get("metrics", m)
    assert m["coverage"] == 0.5 and m["n_answered"] == 20 and m["failed"] == 0
    assert m["coverage_ci_low"] < 0.5 < m["coverage_ci_high"]
    buckets = [k for k in m if k.startswith("pop/") and k.endswith("/n")]
    assert sum(m[k] for k in buckets) == 20
    assert (run_dir / "plots" / "memorization_pop.png").is_file()
