"""How many of a run's answers came from calls made for another run: the request cache records each entry's run, the
ledger counts the hits another run computed (``cost/requests_from_other_runs``), the run summary shows them and
`llmrec compare` prints them per run (and writes them to comparison.json). End to end (slow): the README's "second
subject" with a warm cache gives the over-context count that --no-cache gives, and a copy of a run under another
name says that it computed none of its answers."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app, summary_rows
from llmrec.config import dump_yaml
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.cost import answer_sources, ledger, record_usage
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.cache import CachedEngine, RequestCache
from llmrec.serving.engine import build_engine
from tests.pipelines.toy.benchmark import NAME

runner = CliRunner()
ENGINE = {"type": "fake", "context_length": 60, "default": "yes"}


@pytest.fixture(autouse=True, scope="module")
def verbs():
    if not any(c.name == "compare" for c in app.registered_commands):
        _mount_extra_verbs()


def cached_run(tmp_path, name: str, cache: RequestCache, engine: dict = ENGINE, n: int = 6) -> str:
    """A run directory as `llmrec run` leaves it, its calls made through the shared request cache as run ``name``."""
    d = tmp_path / "runs" / name
    cfg = RunConfig.model_validate({"benchmark": {"name": NAME, "n": n, "rounds": 1}, "engine": engine,
                                    "output": {"dir": str(tmp_path / "runs"), "run_name": name},
                                    "tracking": {"enabled": False}})
    bench_cfg = benchmark_config(cfg.benchmark.model_dump(mode="json"))
    eng = CachedEngine(build_engine(engine), cache, str(d))
    rows = process_samples(get_benchmark(NAME), bench_cfg, get_benchmark(NAME).build_samples(bench_cfg, None),
                           lambda role: eng, retries=1, backoff_s=0.0)
    ResultStore(d / "results").write(rows)
    (d / "resolved.yaml").write_text(dump_yaml(cfg))
    return str(d)


def stored(run: str) -> list[dict]:
    return list(ResultStore(f"{run}/results").load().values())


def test_the_ledger_counts_answers_computed_for_another_run(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    a = cached_run(tmp_path, "a", cache)
    first = stored(a)
    b = cached_run(tmp_path, "b", cache)  # the same engine and requests: every answer is a's
    again = stored(cached_run(tmp_path, "a", cache))  # a redone in its own directory: its own answers
    roles = {"ask": "subject", "follow": "subject"}
    assert answer_sources(first) == {"answers": 12, "from_cache": 0, "from_other_runs": 0}
    assert answer_sources(stored(b)) == {"answers": 12, "from_cache": 12, "from_other_runs": 12}
    assert answer_sources(again) == {"answers": 12, "from_cache": 12, "from_other_runs": 0}
    assert all(o["computed_for"] == a for r in stored(b) for o in [r["outputs"]["ask"]])
    assert not any("computed_for" in o for r in first for o in [r["outputs"]["ask"]])
    m = ledger(record_usage(stored(b), roles), None, 6)
    assert m["cost/requests_from_other_runs"] == m["cost/subject/requests_from_other_runs"] == 12
    assert m["cost/requests"] == 0 and m["cost/requests_from_cache"] == 12
    assert ledger(record_usage(again, roles), None, 6)["cost/requests_from_other_runs"] == 0


def test_the_run_summary_says_how_many_answers_another_run_computed():
    metrics = {"accuracy": 1.0, "n_samples": 6.0, "cost/requests": 2.0, "cost/requests_from_cache": 10.0,
               "cost/requests_from_other_runs": 7.0, "cost/tokens_per_1k_samples": 10.0}
    assert dict(summary_rows(metrics, {}, ("accuracy",)))["answers_from_other_runs"] == "7 of 12"
    assert "answers_from_other_runs" not in dict(summary_rows({"accuracy": 1.0}, {}, ("accuracy",)))  # no ledger


def test_compare_prints_and_writes_each_runs_answers_from_other_runs(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    a = cached_run(tmp_path, "a", cache)
    b = cached_run(tmp_path, "b", cache)
    res = runner.invoke(app, ["compare", a, b, "--resamples", "200", "--no-tracking"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.replace("│", " ").split())
    assert "answers from other runs' calls (request cache): a 0 of 12; b 12 of 12 (ALL: this run computed none of " \
           "them)" in text
    doc = json.loads((tmp_path / "runs" / "comparisons" / "a--vs--b" / "comparison.json").read_text())
    assert [(r["label"], r["answers"], r["answers_from_cache"], r["answers_from_other_runs"]) for r in doc["runs"]] \
        == [("a", 12, 0, 0), ("b", 12, 12, 12)]


@pytest.mark.slow
def test_a_smaller_context_with_a_warm_cache_fails_as_without_it(tmp_path, local_ray):
    """The README's second subject on the fake engine: the same config with a smaller context, asked after the first
    run filled the cache, has the over-context samples that --no-cache gives; a copy of the first run under another
    name computed none of its answers, and its summary says so."""
    cfg = RunConfig.model_validate({
        "benchmark": {"name": NAME, "n": 6, "rounds": 1}, "engine": ENGINE,
        "execution": {"batch_size": 3, "backoff_s": 0.01, "retries": 0}, "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs")}, "tracking": {"enabled": False}})
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    share = ["--max-failed-share", "1"]

    def run(*args):
        out = runner.invoke(app, ["run", str(path), *share, *args])
        assert out.exit_code == 0, out.output
        return {k: v for k, v in (line.replace("│", " ").split()[:2] for line in out.stdout.splitlines()
                                  if line.replace("│", " ").split()[:1] and len(line.replace("│", " ").split()) >= 2)}

    first = run()
    assert first["over_context"] == "0" and first["answers_from_other_runs"] == "0"
    small = ["--set", "engine.context_length=5"]  # follow-ups (6 prompt tokens) no longer fit; questions (4) do
    warm = run(*small)
    cold = run(*small, "--no-cache", "--set", "output.run_name=cold")
    assert warm["over_context"] == cold["over_context"] == "6"
    copy = run("--set", "output.run_name=copy")
    assert copy["answers_from_other_runs"] == "12"


def test_the_sample_viewer_names_the_run_that_computed_a_cached_answer():
    from llmrec.pipelines.results.viewer import call_view
    from llmrec.transcripts import Call

    hit = call_view(Call("ask", 0, "subject", {"text": "yes", "from_cache": True, "computed_for": "/runs/a"}, None))
    own = call_view(Call("ask", 0, "subject", {"text": "yes", "from_cache": True}, None))
    assert (hit["from_cache"], hit["computed_for"]) == (True, "/runs/a") and own["computed_for"] is None
