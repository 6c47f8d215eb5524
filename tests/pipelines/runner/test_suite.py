"""`llmrec suite` on the fake engine and the toy benchmark: every entry for every subject with one
engine start per subject, suite.json, resume after an interrupted entry, MLflow names/times/parent
metrics, and config errors that name the file and the key."""

from __future__ import annotations

import json

import pytest
import yaml

from llmrec.errors import ConfigError
from llmrec.pipelines.runner.suite import run_suite
from llmrec.pipelines.runner.suite_config import load_suite_config
from tests.pipelines.toy.benchmark import NAME


def suite_file(tmp_path, subjects=("a", "b"), **extra) -> str:
    """Two subjects (each counting its engine starts in its own file) × three toy entries: two inline, one a
    run config file whose engine/output/tracking the suite replaces."""
    run = tmp_path / "toy_run.yaml"
    run.write_text(yaml.safe_dump({"benchmark": {"name": NAME, "n": 3, "rounds": 0},
                                   "engine": {"type": "fake", "model": "ignored"},
                                   "execution": {"batch_size": 1}, "output": {"dir": "elsewhere"}}))
    data = {
        "name": "s1",
        "subjects": {s: {"type": "fake", "model": f"model-{s}", "default": "yes" if s == "a" else "no",
                         "start_log": str(tmp_path / f"starts-{s}.txt")} for s in subjects},
        "benchmarks": [{"entry": "t1", "benchmark": {"name": NAME, "n": 4, "rounds": 1}},
                       {"entry": "t2", "benchmark": {"name": NAME, "n": 6, "rounds": 0}},
                       {"config": str(run), "entry": "t3"}],
        "execution": {"batch_size": 2, "backoff_s": 0.01, "retries": 1},
        "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")},
        **extra,
    }
    p = tmp_path / "suite.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def starts(tmp_path, subject: str) -> int:
    f = tmp_path / f"starts-{subject}.txt"
    return len(f.read_text().splitlines()) if f.exists() else 0


def test_suite_starts_each_subject_once_and_resumes(tmp_path, local_ray):
    import mlflow

    cfg = load_suite_config(suite_file(tmp_path))
    out = run_suite(cfg)
    assert not out.errors
    # one engine start per subject for its three benchmarks (a plain run per benchmark would start three)
    assert starts(tmp_path, "a") == 1 and starts(tmp_path, "b") == 1
    assert set(out.engine_start_s) == {"a", "b"}
    index = json.loads((tmp_path / "runs" / "s1" / "suite.json").read_text())
    assert index["name"] == "s1" and index["subjects"] == ["a", "b"]
    assert [(e["subject"], e["entry"], e["kind"]) for e in index["entries"]] == [
        (s, e, "llm") for s in "ab" for e in ("t1", "t2", "t3")] + [
        ("even_yes", e, "baseline") for e in ("t1", "t2", "t3")]
    # the benchmark's baseline, scored on the same samples without an engine, in a run directory of its own
    base = tmp_path / "runs" / "s1" / "even_yes" / "t2"
    assert json.loads((base / "metrics.json").read_text())["accuracy"] == 0.5
    assert (base / "samples.parquet").is_file() and (base / "predictions.jsonl").is_file()
    for e in index["entries"][:6]:
        assert e["run_dir"] == str(tmp_path / "runs" / "s1" / e["subject"] / e["entry"])
        assert e["headline"] == ["accuracy", "failed"] and e["benchmark"] == NAME and e["mlflow_run_id"]
        metrics = json.loads((tmp_path / "runs" / "s1" / e["subject"] / e["entry"] / "metrics.json").read_text())
        assert metrics["accuracy"] == (1.0 if e["subject"] == "a" else 0.0)  # the subject's own engine answered
    assert out.metrics[("a", "t3")]["n_samples"] == 3  # the run config file's benchmark section

    # MLflow: a parent per subject with <entry>.<metric>, a child per entry, settings below; real times
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    exp = client.get_experiment_by_name("s1")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    parent = runs["a · s1"]
    assert parent.data.metrics["t1.accuracy"] == 1.0 and parent.data.metrics["t2.failed"] == 0.0
    assert runs["even_yes · s1"].data.metrics["t2.accuracy"] == 0.5  # the baseline is a row of the same view
    view = json.loads(exp.tags["mlflow.sharedViewState.llmrec-headline"])
    cols = view["selectedColumns"]
    # each entry's headline metric and its CI bounds, in suite order, first; the children's own columns are not
    assert cols[1:7] == ["metrics.`t1.accuracy`", "metrics.`t1.accuracy_ci_low`", "metrics.`t1.accuracy_ci_high`",
                         "metrics.`t2.accuracy`", "metrics.`t2.accuracy_ci_low`", "metrics.`t2.accuracy_ci_high`"]
    assert "metrics.`accuracy`" not in cols and "params.`engine.model`" in cols and "params.`engine.default`" in cols
    assert view["orderByKey"] == "attributes.start_time" and view["orderByAsc"]  # nested, in suite order
    assert parent.data.params["engine.model"] == "model-a" and parent.data.params["engine.default"] == "yes"
    assert runs["b · s1"].data.params["engine.default"] == "no" and "engine.start_log" in parent.data.params
    assert json.loads(parent.data.tags["protocol"]).keys() == {"t1", "t2", "t3"}
    child = runs["t2 · a"]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.data.tags["llmrec.config_hash"] and "t2" == child.data.tags["llmrec.run_dir"]
    setting = runs["kind=even · t2 · a"]
    assert setting.data.tags["mlflow.parentRunId"] == child.info.run_id
    assert parent.info.start_time <= child.info.start_time <= child.info.end_time <= parent.info.end_time
    assert parent.info.end_time - parent.info.start_time >= 1000  # the suite's wall clock, not a logging instant

    # an interrupted entry: subject a's t2 lost a result shard; b is complete
    results = tmp_path / "runs" / "s1" / "a" / "t2" / "results"
    shard = sorted(results.glob("*.parquet"))[0]
    shard.unlink()
    again = run_suite(cfg)
    assert starts(tmp_path, "a") == 2  # started again, once, for the half-done entry
    assert starts(tmp_path, "b") == 1  # every entry of b was finished: its engine was not started
    assert again.metrics == out.metrics
    assert len(json.loads((tmp_path / "runs" / "s1" / "suite.json").read_text())["entries"]) == 9
    assert len(client.search_runs([exp.experiment_id], "attributes.run_name = 'a · s1'")) == 1  # same parent


def test_only_one_subject_keeps_the_others_in_suite_json(tmp_path, local_ray):
    path = suite_file(tmp_path, subjects=("a", "b"))
    cfg = load_suite_config(path, ["benchmarks=[{entry: t1, benchmark: {name: '%s', n: 2, rounds: 0}}]" % NAME,
                                   "tracking.enabled=false"])
    run_suite(cfg, only=["b"])
    run_suite(cfg, only=["a"])
    index = json.loads((tmp_path / "runs" / "s1" / "suite.json").read_text())
    assert index["subjects"] == ["b", "a"]
    assert [e["subject"] for e in index["entries"]] == ["b", "even_yes", "a"]
    with pytest.raises(ConfigError, match="--subject c: not a subject of suite 's1'"):
        run_suite(cfg, only=["c"])


def write(tmp_path, data: dict) -> str:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


BASE = {"name": "s", "subjects": {"a": {"type": "fake"}}, "benchmarks": [{"benchmark": {"name": NAME}}]}


@pytest.mark.parametrize("change, expected", [
    ({"benchmarks": [{"benchmark": {"name": NAME}}, {"benchmark": {"name": NAME, "nn": 1}, "entry": "x"}]},
     r"bad\.yaml: .*unknown key 'benchmarks\[1\]\.benchmark\.nn'"),
    ({"subjects": {"a": {"type": "fake", "temprature": 1}}}, r"bad\.yaml: .*unknown key 'subjects\.a\.temprature'"),
    ({"subjects": {"a": {"type": "nope"}}}, r"bad\.yaml: .*nope"),
    ({"benchmarks": [{"benchmark": {"name": NAME}, "engine": {"type": "fake"}}]},
     r"bad\.yaml: .*unknown key 'benchmarks\.0\.engine'"),
    ({"benchmarks": [{"benchmark": {"name": NAME}}, {"benchmark": {"name": NAME}}]},
     r"bad\.yaml: .*benchmarks\[0\] and benchmarks\[1\] are both entry"),
    ({"benchmarks": [{"benchmark": {"name": NAME}, "execution": {"concurrency": 2}}]},
     r"bad\.yaml: 'benchmarks\[0\]\.execution\.concurrency' is 2 but the suite's execution\.concurrency is 1"),
    ({"benchmarks": [{"benchmark": {"name": NAME}, "execution": {"batch_size": 0}}]},
     r"bad\.yaml: .*'benchmarks\[0\]\.execution\.batch_size'"),
    ({"benchmarks": ["missing.yaml"]}, r"bad\.yaml: benchmarks\[0\]\.config: Config file not found: missing\.yaml"),
    ({"output": {"run_name": "x"}}, r"bad\.yaml: .*remove output\.run_name"),
    ({"subjects": {"a/b": {"type": "fake"}}}, r"bad\.yaml: .*subjects\.a/b"),
    ({"benchmarks": [{"benchmark": {"name": "prefeval"}, "baselines": {}}]},
     r"bad\.yaml: 'benchmarks\[0\]\.baselines': benchmark prefeval has no candidates .*remove the key"),
    ({"benchmarks": [{"benchmark": {"name": NAME}, "baselines": {"models": [{"model": {"name": "bprmf", "dim": 2}}]}}]},
     r"bad\.yaml: 'benchmarks\[0\]\.baselines\.models\[0\]': .*unknown key 'model\.dim'"),
])
def test_bad_suite_config_names_file_and_key(tmp_path, change, expected):
    with pytest.raises(ConfigError, match="(?s)" + expected):
        load_suite_config(write(tmp_path, {**BASE, **change}))


def test_cli_suite_prints_the_table(tmp_path, local_ray):
    from typer.testing import CliRunner

    from llmrec.cli import app

    path = suite_file(tmp_path, subjects=("a",))
    # one entry is a table (every entry of a suite: the test above); no baseline row
    one = "benchmarks=[{entry: t1, benchmark: {name: '%s', n: 4, rounds: 1}}]" % NAME
    res = CliRunner().invoke(app, ["suite", path, "--set", "tracking.enabled=false", "--set", one,
                                   "--set", "baselines=false"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.replace("│", " ").split())
    # every cell carries n; 4 samples are too few to rank (†): their zero-width bootstrap CI is no evidence
    assert "suite s1" in res.output and "1.000 [1.000, 1.000] n=4†" in flat and "engine starts: a" in res.output
    bad = CliRunner().invoke(app, ["suite", path, "--subject", "zz"])
    assert bad.exit_code == 2 and "not a subject" in bad.output


@pytest.mark.slow
@pytest.mark.integration
def test_serve_mode_deploys_one_app_per_subject(tmp_path, local_ray):
    """mode: serve: the subject's Serve app is deployed once for its three entries (one replica = one engine start)
    and deleted after the subject's last entry."""
    from llmrec.serving.serve_app import running_apps

    cfg = load_suite_config(suite_file(tmp_path, subjects=("a",)), [
        "execution.mode=serve", "execution.num_cpus_per_worker=0.25", "execution.serve_backoff_s=0.5",
        "tracking.enabled=false", "baselines=false"])
    out = run_suite(cfg)
    assert not out.errors and starts(tmp_path, "a") == 1
    assert [out.metrics[("a", e)]["accuracy"] for e in ("t1", "t2", "t3")] == [1.0, 1.0, 1.0]
    assert not [a for a in running_apps() if a.startswith("llmrec-")]


RANKING = "user_id,item_id,timestamp\n" + "".join(
    f"{u},{i},{t}\n" for u, seq in {"u0": ["i1", "i2", "i0"], "u1": ["i0", "i3", "i6"], "u2": ["i0", "i4", "i7"],
                                   "u3": ["i0", "i3", "i8"]}.items() for t, i in enumerate(seq))


def test_trained_baselines_rank_the_entrys_candidates_and_are_not_retrained(tmp_path, local_ray, monkeypatch):
    """A benchmark that ranks candidates (ranking_baselines): the entry's recommenders are trained on its
    interactions, rank the same samples' candidates, and stand as baseline rows in suite.json and the
    leaderboard; a re-run reads their results instead of training again, a changed model setting retrains."""
    from llmrec.pipelines.baselines import rank
    from llmrec.pipelines.results.leaderboard import leaderboard

    (tmp_path / "inter.csv").write_text(RANKING)
    entry = {"entry": "r", "benchmark": {"name": NAME, "n": 4, "rounds": 0, "ranking": str(tmp_path / "inter.csv")},
             "baselines": {"models": [{"model": {"name": "mostpop"}}], "train": {"epochs": 1}}}
    path = suite_file(tmp_path, subjects=("a",))
    cfg = load_suite_config(path, ["benchmarks=[%s]" % json.dumps(entry), "tracking.enabled=false"])
    out = run_suite(cfg)
    assert not out.errors
    index = json.loads((tmp_path / "runs" / "s1" / "suite.json").read_text())
    assert [(e["subject"], e["kind"]) for e in index["entries"]] == [
        ("a", "llm"), ("even_yes", "baseline"), ("mostpop", "baseline")]
    # u0's target i0 is the most popular item in training; the others' targets nobody else touched
    assert out.metrics[("mostpop", "r")]["accuracy"] == 0.25
    run_dir = tmp_path / "runs" / "s1" / "mostpop" / "r"
    assert (run_dir / "samples.parquet").is_file() and list((run_dir / "train").glob("train-mostpop-*"))
    board = leaderboard([tmp_path / "runs" / "s1"])
    rows = board[board.metric == "accuracy"].set_index("subject")
    assert rows.loc["mostpop", "kind"] == "baseline" and rows.loc["mostpop", "value"] == 0.25
    assert rows.loc["a", "kind"] == "llm" and rows.loc["a", "entry"] == rows.loc["mostpop", "entry"] == "r"

    def no_training(*a, **k):
        raise AssertionError("a baseline whose result exists was trained again")

    monkeypatch.setattr(rank, "train_from_config", no_training)
    again = run_suite(cfg)
    assert again.metrics[("mostpop", "r")] == out.metrics[("mostpop", "r")]
    assert len(json.loads((tmp_path / "runs" / "s1" / "suite.json").read_text())["entries"]) == 3
    changed = load_suite_config(path, ["benchmarks=[%s]" % json.dumps(
        {**entry, "baselines": {**entry["baselines"], "train": {"epochs": 2}}}), "tracking.enabled=false"])
    with pytest.raises(AssertionError, match="trained again"):
        run_suite(changed)
