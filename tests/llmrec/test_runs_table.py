"""`llmrec runs`: one row per MLflow run; a setting run's setting shows once (in its column, not also in the name)."""

from __future__ import annotations

from rich.console import Console

from llmrec import tracking
from llmrec.runs_table import runs_table


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
    console.print(runs_table(uri, "suite-x", ["accuracy"], 10))
    lines = console.export_text().splitlines()
    row = next(line for line in lines if "0.5000" in line)
    assert row.count("form=explicit,turns=2") == 1 and "gemma · prefeval" in row
    assert sum("gemma · prefeval" in line for line in lines) == 2  # the parent's row and the child's
