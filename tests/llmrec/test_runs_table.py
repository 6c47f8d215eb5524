"""`llmrec runs`: one line per MLflow run (run, benchmark, subject, headline [CI], n, failed); --wide adds the
setting (shown once: in its column, not also in the name); --csv every column; an unknown --metric is refused."""

from __future__ import annotations

from rich.console import Console

from llmrec import tracking
from llmrec.pipelines.results.runs_table import runs_csv, runs_table


def test_a_setting_run_shows_its_setting_once(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    client = tracking.client(uri)
    exp = client.create_experiment("suite-x", artifact_location=str(tmp_path / "art"))
    parent = client.create_run(exp, run_name="gemma · prefeval", tags={tracking.TAG_KIND: "run"})
    child = client.create_run(exp, run_name="gemma · prefeval · form=explicit,turns=2",
                              tags={tracking.TAG_KIND: "run", tracking.TAG_SETTING: "form=explicit,turns=2",
                                    tracking.TAG_PARENT: parent.info.run_id})
    client.log_metric(child.info.run_id, "accuracy", 0.5)
    console = Console(record=True, width=300)
    console.print(runs_table(uri, "suite-x", ["accuracy"], 10, wide=True))
    lines = console.export_text().splitlines()
    row = next(line for line in lines if "0.5000" in line)
    assert row.count("form=explicit,turns=2") == 1 and "gemma · prefeval" in row
    assert sum("gemma · prefeval" in line for line in lines) == 2  # the parent's row and the child's


def _store(tmp_path) -> str:
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    client = tracking.client(uri)
    exp = client.create_experiment("suite-x", artifact_location=str(tmp_path / "art"))
    for subject, acc in (("gemma", 0.25), ("gemma-grammar", 0.5)):
        run = client.create_run(exp, run_name=f"prefeval · {subject} · " + "x" * 60, tags={
            tracking.TAG_KIND: "run", tracking.TAG_HEADLINE: "accuracy,failed", "benchmark": "prefeval",
            "model": subject})
        for k, v in {"accuracy": acc, "accuracy_ci_low": acc - 0.1, "accuracy_ci_high": acc + 0.1, "failed": 2.0,
                     "samples_resumed": 10.0, "samples_new": 30.0, "time_total_s": 3.0}.items():
            client.log_metric(run.info.run_id, k, v)
        client.log_param(run.info.run_id, "engine.model_path", "/models/" + "long-name-" * 8)
    return uri


def test_one_line_per_run_by_default(tmp_path):
    uri = _store(tmp_path)
    console = Console(record=True, width=110)
    console.print(runs_table(uri, "suite-x", [], 10, width=110))
    lines = console.export_text().splitlines()
    rows = [line for line in lines if "prefeval ·" in line]
    assert len(rows) == 2, lines  # one line each, however long the name
    row = next(r for r in rows if "gemma-grammar" in r)
    assert "accuracy 0.500 [0.400, 0.600]" in row and " 40 " in row and row.rstrip(" │").endswith("2")
    assert "long-name" not in "\n".join(lines)  # the config summary is --wide's


def test_csv_has_every_column_and_an_unknown_metric_is_refused(tmp_path):
    import csv
    import io

    import pytest

    from llmrec.errors import ConfigError

    uri = _store(tmp_path)
    rows = list(csv.DictReader(io.StringIO(runs_csv(uri, "suite-x", [], 10))))
    assert {r["subject"] for r in rows} == {"gemma", "gemma-grammar"} and {r["n"] for r in rows} == {"40.0"}
    assert {"accuracy", "accuracy_ci_low", "failed", "setting", "run_id"} <= set(rows[0])
    with pytest.raises(ConfigError, match=r"--metric acuracy: no metric of that name in these runs \(they have: "
                                          r"accuracy, failed"):
        runs_table(uri, "suite-x", ["acuracy"], 10)


def test_a_tracking_uri_that_is_no_store_is_one_clear_error(tmp_path):
    """``llmrec runs --tracking-uri`` naming a YAML file, a non-database behind sqlite:///, or a folder MLflow cannot
    read: one ``error:`` line naming it, no MLflow traceback."""
    from typer.testing import CliRunner

    from llmrec.cli import app

    config = tmp_path / "c.yaml"
    config.write_text("benchmark: {name: prefeval}\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    for uri, said in [(str(config), "is a file, not an MLflow store"),
                      (f"sqlite:///{config}", "is not a SQLite database"),
                      (str(tmp_path / "plain"), "cannot be read")]:
        out = CliRunner().invoke(app, ["runs", "--tracking-uri", uri])
        assert out.exit_code == 2 and said in out.output, (uri, out.output)
        assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
