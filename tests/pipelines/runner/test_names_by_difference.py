"""Runs of one benchmark and subject that differ are named by what differs: MLflow run names
(``toy · fake-model default=no``), the leaderboard's and report's subject labels (``gemma n_ctx=4096`` instead of
``gemma (prefeval-8a613c27f7a4)``), and `llmrec compare`, which prints the differing config keys before its table
and writes them to comparison.json."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from llmrec import tracking
from llmrec.cli import _mount_extra_verbs, app
from llmrec.pipelines.results.leaderboard import leaderboard
from llmrec.pipelines.runner.report import names_by_difference
from llmrec.pipelines.runner.run_config import RunConfig
from tests.pipelines.results_fixtures import write_run
from tests.pipelines.runner.test_compare import fake_run
from tests.pipelines.toy.benchmark import NAME


def test_labels_name_the_keys_whose_values_differ():
    labels = tracking.differing_labels({
        "a": {"engine": {"type": "llamacpp", "n_ctx": 8192, "n_threads": 1}, "benchmark": {"turns": [2, 10]}},
        "b": {"engine": {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1}, "benchmark": {"turns": [2, 10]}},
        "c": {"engine": {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1}, "benchmark": {"turns": [2]}}})
    assert labels == {"a": "n_ctx=8192 turns=[2,10]", "b": "n_ctx=4096 turns=[2,10]", "c": "n_ctx=4096 turns=[2]"}
    # one last part in two sections: the whole key; a key one config lacks: —; alike configs: nothing
    both = tracking.differing_labels({1: {"engine": {"max_tokens": 5}, "judge": {"max_tokens": 5}},
                                      2: {"engine": {"max_tokens": 9}, "judge": {"max_tokens": 7, "api_key": "x"}}})
    assert both == {1: "engine.max_tokens=5 judge.max_tokens=5", 2: "engine.max_tokens=9 judge.max_tokens=7"}
    assert tracking.differing_labels({1: {"a": {"b": 1}}, 2: {"a": {"b": 1}}}) == {1: "", 2: ""}
    assert tracking.differing_labels({1: {"a": 1}, 2: {}}) == {1: "a=1", 2: "a=—"}
    assert tracking.differing_labels({1: {"a": "x" * 100}, 2: {"a": "y"}})[1] == "a=" + "x" * 39 + "…"


def _config(tmp_path, default: str, **engine) -> RunConfig:
    return RunConfig.model_validate({
        "benchmark": {"name": NAME, "n": 2}, "engine": {"type": "fake", "default": default, **engine},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")}})


def test_mlflow_names_carry_what_differs_from_the_experiments_runs_of_that_benchmark_and_model(tmp_path):
    client = tracking.client(f"sqlite:///{tmp_path}/mlruns.db")
    exp = tracking.ensure_experiment(client, NAME, str(tmp_path / "art"))
    base = f"{NAME} · fake-model"

    def logged(cfg: RunConfig, name: str, **tags) -> str:
        run = client.create_run(exp, run_name=name, tags={tracking.TAG_KIND: "run", "benchmark": NAME,
                                                            "model": "fake-model", **tags})
        tracking.log_params(client, run.info.run_id, cfg.model_dump(mode="json"))
        return run.info.run_id

    def plan(cfg: RunConfig):
        return SimpleNamespace(config=cfg, bench=SimpleNamespace(name=NAME))

    first = _config(tmp_path, "yes")
    # alone (or with runs of other models or of a suite): the plain name
    logged(_config(tmp_path, "no", model="other-model"), "other", model="other-model")
    logged(_config(tmp_path, "no"), "a suite entry", **{tracking.TAG_PARENT: "x"})
    assert names_by_difference(client, exp, plan(first), None, base) == (base, {})
    a = logged(first, base)
    again = logged(first.model_copy(update={"output": first.output.model_copy(update={"dir": "elsewhere"})}), base)
    # the same settings in another output dir: nothing to tell apart
    assert names_by_difference(client, exp, plan(first), a, base) == (base, {})
    # another value of an engine option: this run's name says it, and the earlier runs are renamed to say theirs
    second = _config(tmp_path, "no", delay_s=0.0)
    name, renamed = names_by_difference(client, exp, plan(second), None, base)
    assert name == f"{base} default=no"
    assert renamed == {a: f"{base} default=yes", again: f"{base} default=yes"}
    b = logged(second, name)
    third = _config(tmp_path, "no", context_length=4096)
    name, renamed = names_by_difference(client, exp, plan(third), None, base)
    assert name == f"{base} context_length=4096 default=no"  # in config order; MLflow params are text
    assert renamed == {a: f"{base} context_length=None default=yes", again: f"{base} context_length=None default=yes",
                       b: f"{base} context_length=None default=no"}


def _write(tmp_path, name: str, engine: dict):
    d = write_run(tmp_path / name, "prefeval", "gemma-3-270m", {"accuracy": 0.5, "missed_rate": 0.0})
    cfg = {"benchmark": {"name": "prefeval"}, "engine": {"type": "fake", "model": "gemma-3-270m", **engine},
           "output": {"dir": str(tmp_path / name)}, "tracking": {"enabled": False}}
    (d / "resolved.yaml").write_text(yaml.safe_dump(cfg))
    return d


def test_leaderboard_and_report_label_runs_of_one_model_by_what_differs(tmp_path):
    a = _write(tmp_path, "prefeval-aaa", {"context_length": 8192})
    b = _write(tmp_path, "prefeval-bbb", {"context_length": 4096})
    c = _write(tmp_path, "prefeval-ccc", {"context_length": 4096})  # b's settings again: told apart by the folder
    assert set(leaderboard([a, b]).subject) == {"gemma-3-270m context_length=8192",
                                                "gemma-3-270m context_length=4096"}
    assert set(leaderboard([a, b, c]).subject) == {"gemma-3-270m context_length=8192",
                                                   "gemma-3-270m context_length=4096 (prefeval-bbb)",
                                                   "gemma-3-270m context_length=4096 (prefeval-ccc)"}
    from llmrec.pipelines.results.html_report import render

    html = render([a, b])
    assert "gemma-3-270m context_length=4096" in html and "(prefeval-bbb)" not in html


def test_compare_prints_the_differing_config_keys_before_the_table_and_writes_them(tmp_path):
    if not any(c.name == "compare" for c in app.registered_commands):
        _mount_extra_verbs()
    a = fake_run(tmp_path, "base", "no")
    b = fake_run(tmp_path, "other", "yes")
    res = CliRunner().invoke(app, ["compare", a, b, "--resamples", "200"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    out = res.output
    assert "configs differ (B vs A" in out and "other vs base: engine.default no → yes" in out
    assert out.index("engine.default no → yes") < out.index("diff [95% CI]")  # first, before the table
    doc = json.loads((tmp_path / "runs" / "comparisons" / "base--vs--other" / "comparison.json").read_text())
    assert doc["config_diff"] == [{"a": "base", "b": "other", "key": "engine.default", "value_a": "no",
                                   "value_b": "yes"}]
    same = fake_run(tmp_path, "same", "no")
    res = CliRunner().invoke(app, ["compare", a, same, "--resamples", "200"])
    assert res.exit_code == 0 and "differ in no setting that determines results" in res.output


@pytest.mark.slow
def test_two_runs_of_one_model_are_named_by_what_differs_in_mlflow(tmp_path, local_ray):
    """`llmrec run` twice, the second with another engine option: both MLflow runs (and the second's setting
    children) say which value they ran with."""
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(yaml.safe_dump({
        "benchmark": {"name": NAME, "n": 4, "rounds": 0}, "engine": {"type": "fake", "default": "yes"},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")}}))
    for extra in ([], ["--set", 'engine.default="no"']):
        res = CliRunner().invoke(app, ["run", str(cfg), *extra])
        assert res.exit_code == 0, res.output
    client = tracking.client(f"sqlite:///{tmp_path}/mlruns.db")
    runs = client.search_runs([client.get_experiment_by_name("toy").experiment_id])
    names = sorted(r.info.run_name for r in runs if tracking.TAG_PARENT not in r.data.tags)
    assert names == ["toy · fake-model default=no", "toy · fake-model default=yes"]  # the first one renamed
    children = sorted(r.info.run_name for r in runs if tracking.TAG_PARENT in r.data.tags)
    assert "kind=even · toy · fake-model default=no" in children
