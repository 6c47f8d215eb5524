"""`llmrec compare` prints the fields in which the compared runs' provenance records differ first, before the
configs and the statistics (a copied run with one field edited: that field, nothing else)."""

from __future__ import annotations

import json
import shutil

from llmrec import provenance as prov
from llmrec.rundir import RunDir, RunWriter, dumps_json
from tests.pipelines.runner.test_compare import app, fake_run, runner, verbs  # noqa: F401 - the fixture mounts verbs


def record() -> dict:
    return {"format": 1, "created": "2026-01-01T00:00:00Z", **prov.software(), "host": prov.host_info(),
            "engines": {"subject": {"engine_args": {"type": "fake"},
                                    "model": {"file": "m.gguf", "sha256": "a" * 64}}}}


def test_compare_prints_an_edited_provenance_field_first(tmp_path):
    a = fake_run(tmp_path, "base", "yes", wrong=(9,))
    RunWriter(a).write_provenance(record())
    b = str(tmp_path / "runs" / "copy")
    shutil.copytree(a, b)
    edited = RunDir(b).provenance()
    edited["engines"]["subject"]["model"]["sha256"] = "b" * 64
    edited["created"] = "2026-02-02T00:00:00Z"  # when it ran is not a difference
    RunWriter(b).write_provenance(edited)
    res = runner.invoke(app, ["compare", a, b, "--resamples", "200", "--no-tracking"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "PROVENANCE DIFFERS (what produced the runs; B vs A):"
    assert lines[1].strip() == "copy vs base:"
    assert lines[2].strip() == f"engines.subject.model.sha256: {'a' * 64} → {'b' * 64}"
    assert lines[3].startswith("configs")  # then the configs, then the table
    doc = json.loads((tmp_path / "runs" / "comparisons" / "base--vs--copy" / "comparison.json").read_text())
    assert [d["key"] for d in doc["provenance_diff"]] == ["engines.subject.model.sha256"]


def test_same_provenance_and_no_record_are_said(tmp_path):
    a = fake_run(tmp_path, "one", "yes")
    b = fake_run(tmp_path, "two", "no")
    res = runner.invoke(app, ["compare", a, b, "--resamples", "200", "--no-tracking"], env={"COLUMNS": "200"})
    assert res.output.splitlines()[0].startswith("provenance: none of the runs has a record")
    for d in (a, b):
        RunDir(d).storage.write_text(RunDir.PROVENANCE, dumps_json(record()))
    res = runner.invoke(app, ["compare", a, b, "--resamples", "200", "--no-tracking"], env={"COLUMNS": "200"})
    assert res.output.splitlines()[0] == ("provenance: the compared runs were produced by the same software, models "
                                          "and machine")
