"""Results read as they are, or refused in one line: a metric that is not a number is said to be one, a suite
index listing an entry twice or pointing an entry at another benchmark's run is refused naming the entry, and a run
is never compared with itself."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from typer.testing import CliRunner

from llmrec.cli import app
from llmrec.errors import ConfigError
from llmrec.pipelines.results import leaderboard as lb
from llmrec.pipelines.results.compare import compare_runs
from llmrec.pipelines.runner.suite_config import read_index
from tests.pipelines.results_fixtures import prefeval_rows, suite_dir, write_run

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _extra_verbs():
    from llmrec.cli import _mount_extra_verbs

    if not any(c.name == "leaderboard" for c in app.registered_commands):
        _mount_extra_verbs()


def _text(res) -> str:
    return " ".join(res.output.split())


def _edit_index(suite, change) -> None:
    index = json.loads((suite / "suite.json").read_text())
    change(index["entries"])
    (suite / "suite.json").write_text(json.dumps(index))


def test_a_metric_that_is_not_a_number_is_said_to_be_one(tmp_path, caplog):
    run = write_run(tmp_path / "r", "prefeval", "m", {"accuracy": "high", "missed_rate": [0.1], "failed": None})
    with caplog.at_level(logging.WARNING, logger="llmrec.pipelines.results.leaderboard"):
        df = lb.leaderboard([run])
    assert df.set_index("metric")["value"].isna().all()  # shown as "—", as before
    said = [r.getMessage() for r in caplog.records]
    assert any(f"{run}/metrics.json: 'accuracy' is 'high', not a number" in m for m in said), said
    assert any("'missed_rate' is [0.1], not a number" in m for m in said), said
    assert not any("'failed'" in m for m in said)  # null: not computed, nothing to say


def test_a_metric_written_as_nan_text_is_not_computed_without_a_warning(tmp_path, caplog):
    run = write_run(tmp_path / "r", "prefeval", "m", {"accuracy": "NaN", "missed_rate": 0.1, "failed": 0})
    with caplog.at_level(logging.WARNING):
        lb.leaderboard([run])
    assert not [r for r in caplog.records if "not a number" in r.getMessage()]


def test_an_entry_listed_twice_in_suite_json_is_refused_naming_it(tmp_path):
    s = suite_dir(tmp_path, comparison=False)
    _edit_index(s, lambda entries: entries.append(dict(entries[1])))
    with pytest.raises(ConfigError, match=r"suite.json: entries.5 lists subject 'gemma-a', entry 'prefeval_mcq' "
                                          r"again \(as entries.1 does\)"):
        read_index(s)
    res = runner.invoke(app, ["leaderboard", str(s), "--out", str(tmp_path / "lb")])
    assert res.exit_code == 2 and "entries.5 lists subject 'gemma-a', entry 'prefeval_mcq' again" in _text(res)
    res = runner.invoke(app, ["compare", str(s), "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 2 and "entries.5" in _text(res)  # never a run compared with itself in the Holm family


def test_an_entry_pointing_at_another_benchmarks_run_is_refused_naming_it(tmp_path):
    s = suite_dir(tmp_path, comparison=False)
    _edit_index(s, lambda entries: entries[1].update(run_dir="gemma-a/perrecbench"))  # the prefeval entry
    res = runner.invoke(app, ["leaderboard", str(s), "--out", str(tmp_path / "lb")])
    assert res.exit_code == 2, res.output
    said = _text(res)
    assert "entries.1 (subject 'gemma-a', entry 'prefeval_mcq') names benchmark 'prefeval'" in said
    assert "is a run of 'perrecbench'" in said


def test_a_suite_whose_entries_agree_still_reads(tmp_path):
    s = suite_dir(tmp_path, comparison=False)
    index, entries = read_index(s)
    assert len(entries) == 5 and entries[0][0].kind == "baseline"


def test_a_run_named_twice_is_not_compared_with_itself(tmp_path):
    run = write_run(tmp_path / "a", "prefeval", "m", {"accuracy": 0.5}, prefeval_rows())
    shutil.copytree(run, tmp_path / "b")
    with pytest.raises(ConfigError, match="given twice"):
        compare_runs([run, tmp_path / "a" / ".." / "a"])
    res = runner.invoke(app, ["compare", str(run), str(run), "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 2 and "given twice" in _text(res) and "compared with itself" in _text(res)
