"""StoredRun and open_runs: runs, suites and their entries opened one way; samples read lazily, only the columns asked
for; one error type, naming the path, for what cannot be read."""

from __future__ import annotations

import pytest

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.results.stored import RunNotReadable, StoredRun, StoredSuite, open_runs, read_samples
from llmrec.rundir import RunDir
from tests.pipelines.results_fixtures import suite_dir
from tests.pipelines.runner.viewer_fixtures import prefeval_run


def test_runs_and_suites_open_alike_in_order(tmp_path):
    run = prefeval_run(tmp_path / "r", n=3, model="org/fake-a")
    suite = suite_dir(tmp_path)
    got = open_runs([run, suite])
    assert [r.key for r in got] == [str(i) for i in range(len(got))]
    first = got[0]
    assert (first.subject, first.benchmark, first.entry, first.kind, first.suite_entry) == \
        ("fake-a", "prefeval", "prefeval", "llm", None)
    assert first.label == "fake-a · prefeval" and first.group == "prefeval" and first.metrics["accuracy"] == 0.5
    entries = got[1:]
    assert [r.subject for r in entries] == ["user-average", "gemma-a", "gemma-a", "gemma-b", "gemma-b"]
    assert entries[0].kind == "baseline" and entries[0].config == {} and entries[0].samples() is None
    assert entries[1].suite == "demo_suite" and entries[1].name == "gemma-a/prefeval_mcq"
    assert entries[1].headline == ("accuracy", "missed_rate", "failed")  # the index's
    assert [r.subject for r in StoredSuite.open(suite).runs] == [r.subject for r in entries]


def test_samples_are_read_when_asked_and_only_the_columns_asked_for(tmp_path):
    run = open_runs([prefeval_run(tmp_path / "r", n=4)])[0]
    assert "rows" not in run.__dict__  # nothing read on opening
    some = run.samples(["sample_id", "status", "setting"])
    assert len(some) == 4 and set(some[0]) == {"sample_id", "status", "setting"}
    assert isinstance(some[0]["setting"], dict)  # JSON columns decoded as the whole file's are
    assert run.samples()[0]["setting"] == some[0]["setting"]
    assert run.rows == run.samples()  # no result store: the samples file's rows


def test_what_cannot_be_read_is_one_error_naming_the_path(tmp_path):
    assert issubclass(RunNotReadable, ConfigError) and issubclass(RunNotReadable, DataError)
    with pytest.raises(RunNotReadable, match="nope: no such run or suite directory"):
        open_runs([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotReadable, match=r"empty: neither a run directory \(metrics.json\)"):
        open_runs([tmp_path / "empty"], needs=(RunDir.METRICS,))
    rd = prefeval_run(tmp_path / "r", n=2)
    (rd / RunDir.SAMPLES).write_bytes(b"garbage")
    with pytest.raises(RunNotReadable, match=r"r/samples.parquet: cannot read it as parquet"):
        read_samples(RunDir(rd))
    (rd / RunDir.METRICS).write_text("[1")
    with pytest.raises(RunNotReadable, match="metrics.json: cannot read it as JSON"):
        open_runs([rd])[0].metrics  # noqa: B018
    with pytest.raises(RunNotReadable, match="no per-sample results"):
        StoredRun.held(tmp_path / "none", "s", "prefeval").rows  # noqa: B018


def test_a_held_run_renders_rows_it_was_given(tmp_path):
    run = StoredRun.held(tmp_path / "x", "s", "prefeval", rows=[{"sample_id": "a"}], metrics={"accuracy": 1.0})
    sub = run.with_rows([], name="juror")
    assert run.rows == [{"sample_id": "a"}] and sub.rows == [] and sub.name == "juror" and sub.subject == "s"
