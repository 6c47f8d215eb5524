"""`llmrec runs DIR…`: the lines come from run directories, suite directories (one line per entry) and folders
holding them, read through ``open_runs``; a run listed from its directory shows the headline, CI, n and failed its
metrics file holds, the same as its MLflow run's line. A damaged or foreign directory is one ``error:`` line naming
it (exit 2); an unknown ``--metric`` is refused for directories as for MLflow.

The run is written by the real runner (``run_evaluation``: plan, result store, aggregate, files, MLflow) with the
fake engine on PrefEval; only the streaming through Ray is replaced by the worker's own code in this process."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmrec.cli import app
from llmrec.config import validate
from llmrec.pipelines.results.runs_table import RunLine, mlflow_lines, stored_lines
from llmrec.pipelines.results.stored import RunNotReadable
from tests.conftest import require_data
from tests.pipelines.results_fixtures import suite_dir

runner = CliRunner()


def _in_process_stream(p, progress=None, subject=None):
    """The runner's ``stream`` without Ray: the pending samples through the worker, written to the run's store."""
    from llmrec.pipelines.runner.worker import process_samples
    from llmrec.serving.engine import build_engine

    if not p.pending:
        return []
    engine = build_engine(p.config.engine.model_dump(mode="json"))
    rows = process_samples(p.bench, p.config.benchmark, [dict(s) for s in p.pending], lambda role: engine,
                           retries=1, backoff_s=0.0, assets=p.assets)
    p.store.write(rows)
    return rows


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One PrefEval MCQ run (12 samples, the fake engine right on a quarter) in a run folder, logged to MLflow."""
    from llmrec.pipelines.runner import api
    from llmrec.pipelines.runner.run_config import RunConfig

    data = require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
    tmp = tmp_path_factory.mktemp("runs-sources")
    store = f"sqlite:///{tmp}/mlruns.db"
    cfg = validate(RunConfig, {
        "benchmark": {"name": "prefeval", "topics": ["travel_hotel", "shop_fashion"], "forms": ["explicit"],
                      "turns": [0], "methods": ["zero-shot"], "per_topic": 6},
        "engine": {"type": "fake", "rules": [{"contains": "Las Vegas", "reply": "<choice>C</choice>"}],
                   "default": "<choice>A</choice>"},
        "output": {"dir": str(tmp / "runs"), "run_name": "pe-fake"},
        "tracking": {"uri": store, "artifact_root": str(tmp / "art")}})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "stream", _in_process_stream)
        out = api.run_evaluation(cfg, data_dir=data)
    return Path(out.run_dir), store, out.mlflow_run_id


def _csv(args: list[str]) -> list[dict]:
    res = runner.invoke(app, ["runs", *args, "--csv"])
    assert res.exit_code == 0, res.output
    return list(csv.DictReader(io.StringIO(res.output)))


def test_a_run_directory_shows_the_headline_and_ci_of_its_metrics_file(written):
    run_dir, _, run_id = written
    m = json.loads((run_dir / "metrics.json").read_text())
    assert 0 <= m["accuracy_ci_low"] < m["accuracy"] < m["accuracy_ci_high"] <= 1, m  # a CI worth showing

    (row,) = _csv([str(run_dir)])
    assert (row["benchmark"], row["subject"], row["run"], row["kind"]) == ("prefeval", "fake-model", "pe-fake", "run")
    assert (row["run_id"], row["run_dir"], row["experiment"]) == (run_id, str(run_dir), "prefeval")
    assert [float(row[k]) for k in ("accuracy", "accuracy_ci_low", "accuracy_ci_high", "n", "failed")] == \
        [m["accuracy"], m["accuracy_ci_low"], m["accuracy_ci_high"], m["n_answered"], m["failed"]]
    assert float(row["tokens_per_1k"]) == m["cost/tokens_per_1k_samples"]

    res = runner.invoke(app, ["runs", str(run_dir)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.output.splitlines() if "pe-fake" in ln and "prefeval" in ln]
    shown = f"accuracy {m['accuracy']:.3f} [{m['accuracy_ci_low']:.3f}, {m['accuracy_ci_high']:.3f}]"
    assert shown in line and f" {m['n_answered']:.0f} " in line, res.output
    assert "Runs in " + str(run_dir) in res.output.replace("\n", "")


def test_the_directory_and_its_mlflow_run_give_the_same_line(written):
    run_dir, store, run_id = written
    (stored,) = stored_lines([str(run_dir)])
    (logged,) = [x for x in mlflow_lines(store, None, 50) if x.run_id == run_id]
    assert isinstance(stored, RunLine) and stored.headline == logged.headline
    assert stored.headline[:3] == ("accuracy", "missed_rate", "failed")
    assert [stored.value(m) for m in stored.headline] == [logged.value(m) for m in logged.headline]
    assert stored.value("accuracy").ci_low is not None
    same = ("experiment", "run_id", "kind", "benchmark", "subject", "setting", "run_dir", "n", "failed",
            "usd_per_1k", "tokens_per_1k", "cost_text")
    assert {k: getattr(stored, k) for k in same} == {k: getattr(logged, k) for k in same}
    assert stored.value("accuracy").clusters == 12  # the † mark's count travels with the value


def test_a_suite_is_one_line_per_entry_and_a_folder_lists_what_it_holds(written, tmp_path):
    run_dir, _, _ = written
    suite = suite_dir(tmp_path / "folder")
    rows = _csv([str(suite)])
    assert [(r["subject"], r["benchmark"], r["kind"]) for r in rows] == [
        ("user-average", "perrecbench", "baseline"), ("gemma-a", "prefeval", "run"), ("gemma-a", "perrecbench", "run"),
        ("gemma-b", "prefeval", "run"), ("gemma-b", "perrecbench", "run")]
    assert {r["experiment"] for r in rows} == {"demo_suite"}
    assert rows[1]["run"] == "gemma-a/prefeval_mcq" and rows[1]["accuracy"] == str(0.41666666666666663)
    assert rows[0]["n"] == "" and rows[0]["ptc"] == "0.05"  # a baseline's metrics file says no n: none shown

    shutil.copytree(run_dir, tmp_path / "folder" / "pe-fake")
    (tmp_path / "folder" / "notes").mkdir()  # not a run: skipped
    (tmp_path / "folder" / "notes" / "todo.txt").write_text("x")
    rows = _csv([str(tmp_path / "folder")])
    assert [r["run"] for r in rows] == ["user-average/perrecbench", "gemma-a/prefeval_mcq", "gemma-a/perrecbench",
                                        "gemma-b/prefeval_mcq", "gemma-b/perrecbench", "pe-fake"]
    res = runner.invoke(app, ["runs", str(tmp_path / "folder" / "notes")])
    assert res.exit_code == 2 and "notes: neither a run directory" in res.output, res.output


def test_a_damaged_directory_is_one_error_naming_it(written, tmp_path):
    run_dir, _, _ = written
    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    (bad / "metrics.json").write_text('{"accuracy": 0.5,')
    with pytest.raises(RunNotReadable, match="bad"):
        stored_lines([str(bad)])
    for source in (bad, tmp_path / "missing"):
        res = runner.invoke(app, ["runs", str(run_dir), str(source)])
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
        assert str(source) in res.output.replace("\n", ""), res.output


def test_an_unknown_metric_and_mlflow_options_are_refused_for_directories(written):
    run_dir, store, _ = written
    res = runner.invoke(app, ["runs", str(run_dir), "--metric", "acuracy"])
    assert res.exit_code == 2 and "--metric acuracy: no metric of that name" in res.output, res.output
    assert "accuracy" in res.output.split("they have:")[1]
    rows = _csv([str(run_dir), "--metric", "missed_rate"])
    assert set(rows[0]) >= {"missed_rate", "missed_rate_ci_low"} and "accuracy" not in rows[0]
    res = runner.invoke(app, ["runs", str(run_dir), "--tracking-uri", store])
    assert res.exit_code == 2 and "--tracking-uri: MLflow options" in res.output, res.output


@pytest.mark.integration  # a moto S3 server on 127.0.0.1
def test_runs_on_s3_are_listed_as_the_local_copies_are(written, tmp_path):
    from tests.runtime.helpers import s3_server

    run_dir, _, _ = written
    with s3_server() as bucket:
        import boto3

        s3 = boto3.client("s3")
        suite = suite_dir(tmp_path / "local")
        index = json.loads((suite / "suite.json").read_text())
        for e in index["entries"]:  # as a suite run with output.dir=s3://… records them
            e["run_dir"] = f"s3://{bucket}/demo_suite/{e['subject']}/{e['entry']}"
        (suite / "suite.json").write_text(json.dumps(index))
        for local, prefix in ((suite, "demo_suite"), (run_dir, "runs/pe-fake")):
            for f in local.rglob("*"):
                if f.is_file():
                    s3.upload_file(str(f), bucket, f"{prefix}/{f.relative_to(local)}")
        remote = _csv([f"s3://{bucket}/demo_suite", f"s3://{bucket}/runs/pe-fake"])
        here = _csv([str(suite), str(run_dir)])
        columns = ("run", "benchmark", "subject", "kind", "n", "failed", "accuracy", "accuracy_ci_low", "ptc")
        assert [[r.get(c) for c in columns] for r in remote] == [[r.get(c) for c in columns] for r in here]
        assert remote[-1]["run_dir"] == f"s3://{bucket}/runs/pe-fake"
        res = runner.invoke(app, ["runs", f"s3://{bucket}/nothing-here"])
        assert res.exit_code == 2 and "nothing-here" in res.output, res.output
