"""`llmrec compare` pairs two subjects' probe runs item by item (the worker without Ray, written as `llmrec run`
leaves a run directory): a subject that knows every other item against one that knows none."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from llmrec.config import dump_yaml
from llmrec.pipelines.benchmarks.memorization import BENCHMARK
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.conftest import require_data

BENCH = {"name": "memorization", "items": 30, "seed": 6}


def _run(tmp_path, name: str, rows: list[dict], known: set[str]) -> str:
    rules = [{"contains": f"Input: {r['key']}|", "reply": f"{r['key']}|{r['gold']}" if r["key"] in known else "?"}
             for r in sorted(rows, key=lambda r: -len(r["key"]))]
    engine = {"type": "fake", "model": name, "default": "Unknown", "rules": rules}
    cfg = RunConfig.model_validate({"benchmark": BENCH, "engine": engine, "data": {"dir": str(tmp_path)},
                                    "output": {"dir": str(tmp_path / "runs"), "run_name": name},
                                    "tracking": {"enabled": False}})
    eng = build_engine(engine)
    out = process_samples(BENCHMARK, MemorizationConfig(**BENCH), [dict(r) for r in rows], lambda _: eng, retries=0,
                          backoff_s=0.0)
    d = tmp_path / "runs" / name
    ResultStore(d / "results").write(out)
    (d / "resolved.yaml").write_text(dump_yaml(cfg))
    return str(d)


def test_compare_pairs_two_subjects_item_by_item(tmp_path):
    data = require_data("ml-100k", "u.item").parent.parent
    rows = BENCHMARK.build_samples(MemorizationConfig(**BENCH), data)
    a = _run(tmp_path, "knows-none", rows, set())
    b = _run(tmp_path, "knows-half", rows, {r["key"] for r in rows[::2]})
    if not any(c.name == "compare" for c in app.registered_commands):
        _mount_extra_verbs()
    res = CliRunner().invoke(app, ["compare", a, b, "--resamples", "200", "--metric", "coverage"])
    assert res.exit_code == 0, res.output
    doc = json.loads(next((tmp_path / "runs" / "comparisons").glob("*/comparison.json")).read_text())
    row = next(r for r in doc["rows"] if r["metric"] == "coverage")
    assert row["n_pairs"] == 30 and row["n_clusters"] == 30 and row["diff"] == 0.5 and row["ci_low"] > 0
    assert row["test"] == "mcnemar-exact"  # one item per cluster, binary outcomes
