"""Judge failures are part of every judged number: the failure rate beside each judged headline (run summary,
rejudge, leaderboard, compare, judges), a non-zero exit above execution.max_judge_failed_share, and agreement
statistics that count unreadable answers as their own outcome and refuse kappa for a judge that mostly failed.

The PrefEval generation path runs through the worker (no Ray) with fake engines; the verbs run in-process
(typer's CliRunner) with the pipeline call replaced by that result."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from llmrec.agreement import PAIR_COLUMNS, UNREADABLE as AGREEMENT_UNREADABLE, decision_agreement
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.protocol import UNREADABLE
from llmrec.pipelines.runner import judge_failures as jf
from llmrec.pipelines.runner.failures import summarize_failures
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.pipelines.conftest import config

SUBJECT = {"type": "fake", "default": "Try the Grand Hotel downtown, it is lively at night."}
GARBAGE = {"type": "fake", "model": "broken", "default": "I am not sure what you mean ###"}  # never an <answer>
GOOD = {"type": "fake", "model": "good", "default": "<answer>No</answer>",
        "rules": [{"contains": "acknowledges any user preference",
                   "reply": "<preference>quiet</preference><answer>Yes</answer>"},
                  {"contains": "substantive response", "reply": "<answer>Yes</answer>"}]}


def _engines(**cfgs):
    made = {}
    for role, c in cfgs.items():
        made[role] = build_engine(c)
        made[role].start()
    return made.__getitem__


def _gen_rows(data_root: Path, judge: dict, n: int = 2) -> tuple[PrefEvalConfig, list[dict]]:
    cfg = PrefEvalConfig(name="prefeval", task="gen", topics=["travel_hotel"], per_topic=n, forms=["explicit"],
                         turns=[0], methods=["zero-shot"])
    samples = BENCHMARK.build_samples(cfg, data_root)
    rows = process_samples(BENCHMARK, cfg, samples, _engines(subject=SUBJECT, judge=judge),
                           assets=BENCHMARK.assets(cfg, data_root))
    return cfg, [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


# ---- the rate and the threshold (plain functions) ----------------------------------------------------------------

def test_rate_beside_a_judged_metric_and_the_threshold():
    metrics = {"accuracy": 1.0, "judge_failure_rate": 1.0, "judge_failed": 4.0, "n_judged": 4.0}
    f = jf.for_metric(metrics, "accuracy", ("accuracy",))
    assert f.text() == "judge failed 4/4 (100%)" and f.beside(0.1) == "judge failed 4/4 (100%) ! > 0.1"
    assert f.exceeds(1.0)  # a judge that failed every call always counts, whatever the threshold
    assert jf.for_metric(metrics, "missed_rate", ("accuracy",)) is None  # not a judged metric
    low = {"accuracy": 0.5, "judge_failure_rate": 0.05, "judge_failed": 1.0, "n_judged": 20.0}
    assert not jf.too_many(low, 0.1) and jf.too_many(low, 0.01)
    assert jf.for_metric(low, "accuracy", ("accuracy",)).beside(0.1) == "judge failed 1/20 (5%)"
    assert jf.failures_in({"judge_failure_rate": math.nan}) is None  # nothing judged: nothing to show
    # a scoped metric (GISTBench's chunk-size ablation) reads its scope's rate
    scoped = {"uih5/ig_f1_median": 0.3, "uih5/judge_failure_rate": 0.5, "uih10/judge_failure_rate": 0.0}
    assert jf.for_metric(scoped, "uih5/ig_f1_median", ("ig_f1_median",)).rate == 0.5
    assert [f.scope for f in jf.too_many(scoped, 0.1)] == ["uih5/"]
    text = jf.describe(jf.too_many(metrics, 0.1), 0.1, ("accuracy",))
    assert "judge failed 4/4 (100%)" in text and "execution.max_judge_failed_share is 0.1" in text


def test_leaderboard_cell_carries_the_judge_failure_rate():
    from llmrec.pipelines.results.leaderboard import cell

    assert cell("accuracy", 1.0, 1.0, 1.0, 40, judge_failed=1.0, judge_over=True).endswith("judge failed 100%!")
    assert cell("accuracy", 0.5, 0.4, 0.6, 40, judge_failed=0.02, judge_over=False).endswith("judge failed 2%")
    assert "judge" not in cell("accuracy", 0.5, 0.4, 0.6, 40)


def test_leaderboard_and_report_show_the_rate_beside_a_judged_metric(tmp_path):
    from llmrec.pipelines.results.leaderboard import leaderboard, wide
    from llmrec.pipelines.results.stored import StoredRun

    metrics = {"accuracy": 1.0, "accuracy_ci_low": 1.0, "accuracy_ci_high": 1.0, "missed_rate": 0.0,
               "judge_failure_rate": 1.0, "judge_failed": 4.0, "n_judged": 4.0, "n_answered": 40.0}
    broken = StoredRun.held(tmp_path / "a", "gemma", "prefeval", listed_headline=("accuracy", "missed_rate"),
                            metrics=metrics, config={"execution": {"max_judge_failed_share": 0.1}},
                            judged=("accuracy",))
    lenient = StoredRun.held(tmp_path / "b", "qwen", "prefeval", listed_headline=("accuracy",),
                             metrics={**metrics, "judge_failure_rate": 0.2, "judge_failed": 8.0},
                             config={"execution": {"max_judge_failed_share": 0.25}}, judged=("accuracy",))
    df = leaderboard([broken, lenient])
    acc = df[df["metric"] == "accuracy"].set_index("subject")
    assert acc.loc["gemma", "judge_failure_rate"] == 1.0 and acc.loc["gemma", "judge_over"]
    assert acc.loc["qwen", "judge_failure_rate"] == 0.2 and not acc.loc["qwen", "judge_over"]  # its own threshold
    assert math.isnan(df[df["metric"] == "missed_rate"]["judge_failure_rate"].iloc[0])  # not judged
    cells = wide(df).set_index("subject")["prefeval: accuracy"]
    assert cells["gemma"].endswith("judge failed 100%!") and cells["qwen"].endswith("judge failed 20%")


def test_compare_table_and_report_carry_each_runs_judge_failure_rate(tmp_path):
    import json

    from rich.console import Console

    from llmrec.pipelines.results.compare import Comparison, judge_cell, table
    from llmrec.pipelines.results.html_report import _comparison

    row = {"group": "prefeval", "a": "good", "b": "broken", "metric": "accuracy", "setting": "all",
           "statistic": "mean", "value_a": 0.5, "value_b": 1.0, "diff": 0.5, "ci_low": 0.1, "ci_high": 0.9, "p": 0.04,
           "p_holm": 0.04, "n_pairs": 40, "n_clusters": 20, "test": "mcnemar-exact",
           "judge_failure_rate_a": 0.0, "judge_over_a": False, "judge_failure_rate_b": 1.0, "judge_over_b": True}
    assert judge_cell(row) == "0% / 100%!" and judge_cell({"metric": "failed"}) == ""
    cfg = PrefEvalConfig(name="prefeval", task="gen")
    comp = Comparison([_run("good", cfg, [], tmp_path), _run("broken", cfg, [], tmp_path)], rows=[row])
    console = Console(record=True, width=250)
    console.print(table(comp))
    text = console.export_text()
    assert "judge failed A / B" in text and "0% / 100%!" in text and "a judged difference with a high rate" in text
    (tmp_path / "comparison.json").write_text(json.dumps({"runs": [], "rows": [row]}))
    shown = _comparison(tmp_path / "comparison.json")
    assert shown["columns"][-1] == "judge failed A / B" and shown["rows"][0][-1] == "0% / 100%!"


# ---- PrefEval generation with a judge that fails every call -----------------------------------------------------

def test_generation_with_a_broken_judge_reports_its_failure_rate(data_root):
    from llmrec.cli import summary_rows

    cfg, rows = _gen_rows(data_root, GARBAGE)
    metrics = BENCHMARK.aggregate(cfg, rows, None)
    # the reference's rule scores unreadable answers as passing; the rate says so beside the number
    assert metrics["accuracy"] == 1.0 and metrics["judge_failure_rate"] == 1.0 and metrics["judge_failed"] == 2
    shown = dict(summary_rows(metrics, {}, BENCHMARK.headline_metrics, BENCHMARK.judged_metrics, 0.1))
    assert shown["accuracy"].startswith("1.0000") and "judge failed 2/2 (100%) ! > 0.1" in shown["accuracy"]
    assert [BENCHMARK.judge_failures(cfg, r) for r in rows] == [(1, 1), (1, 1)]
    # every judged decision of the broken judge is its own outcome, never a yes or a no
    labels = {d.label for r in rows for d in BENCHMARK.judge_decisions(cfg, r)}
    assert labels == {UNREADABLE} and UNREADABLE == AGREEMENT_UNREADABLE


def _outcome(tmp_path: Path, metrics: dict, rows: list[dict]):
    from llmrec.pipelines.runner.api import RunOutcome

    return RunOutcome(tmp_path / "runs" / "r", metrics, {"samples_new": float(len(rows))}, None,
                      summarize_failures(rows), {}, BENCHMARK.headline_metrics, {}, BENCHMARK.judged_metrics)


def _run_cli(tmp_path, monkeypatch, metrics, rows, *extra):
    from llmrec import cli
    from llmrec.pipelines.runner import api

    monkeypatch.setattr(api, "run_evaluation", lambda cfg, data_dir, progress: _outcome(tmp_path, metrics, rows))
    path = config(tmp_path, task="gen", topics=["travel_hotel"], forms=["explicit"], turns=[0],
                  methods=["zero-shot"], per_topic=2)
    return CliRunner().invoke(cli.app, ["run", str(path), *extra])


def test_run_exits_non_zero_when_the_judge_failed_every_call(tmp_path, data_root, monkeypatch):
    cfg, rows = _gen_rows(data_root, GARBAGE)
    metrics = BENCHMARK.aggregate(cfg, rows, None)
    res = _run_cli(tmp_path, monkeypatch, metrics, rows)
    assert res.exit_code == 1, res.output
    assert "judge failed 2/2 (100%) !" in res.output
    assert "judge's answers could not be read" in res.output and "max_judge_failed_share" in res.output
    # raising the threshold does not excuse a judge that never answered readably
    res = _run_cli(tmp_path, monkeypatch, metrics, rows, "--set", "execution.max_judge_failed_share=1")
    assert res.exit_code == 1, res.output


def test_run_with_a_readable_judge_exits_zero_and_shows_a_zero_rate(tmp_path, data_root, monkeypatch):
    cfg, rows = _gen_rows(data_root, GOOD)
    metrics = BENCHMARK.aggregate(cfg, rows, None)
    assert metrics["judge_failure_rate"] == 0.0
    res = _run_cli(tmp_path, monkeypatch, metrics, rows)
    assert res.exit_code == 0, res.output
    assert "judge failed 0/2 (0%)" in res.output and "!" not in res.output.split("judge failed 0/2")[1][:4]


def test_a_rate_above_the_threshold_fails_and_a_higher_threshold_accepts_it(tmp_path, monkeypatch):
    metrics = {"accuracy": 0.8, "accuracy_ci_low": 0.7, "accuracy_ci_high": 0.9, "judge_failure_rate": 0.25,
               "judge_failed": 5.0, "n_judged": 20.0, "failed": 0.0}
    rows = [{"sample_id": str(i), "status": "ok"} for i in range(20)]
    res = _run_cli(tmp_path, monkeypatch, metrics, rows)
    assert res.exit_code == 1 and "judge failed 5/20 (25%) ! > 0.1" in res.output
    res = _run_cli(tmp_path, monkeypatch, metrics, rows, "--set", "execution.max_judge_failed_share=0.3")
    assert res.exit_code == 0, res.output
    assert "judge failed 5/20 (25%)" in res.output and "(25%) !" not in res.output


def test_rejudge_with_a_broken_judge_shows_the_rate_and_exits_non_zero(tmp_path, data_root, monkeypatch):
    import typer

    from llmrec.pipelines.results import rejudge
    from llmrec.pipelines.results.judges_cli import register
    from llmrec.pipelines.runner.run_config import load_run_config

    cfg, rows = _gen_rows(data_root, GARBAGE)
    metrics = BENCHMARK.aggregate(cfg, rows, None)
    run_cfg = load_run_config(config(tmp_path, task="gen", topics=["travel_hotel"], forms=["explicit"], turns=[0],
                                     methods=["zero-shot"], per_topic=2))
    source = tmp_path / "source"
    source.mkdir()
    judge_file = tmp_path / "judge.yaml"
    judge_file.write_text(yaml.safe_dump(GARBAGE))

    class Source:
        carried = missing = 0

    monkeypatch.setattr(rejudge, "rejudge_config", lambda *a, **k: (run_cfg, run_cfg))
    monkeypatch.setattr(rejudge, "run_rejudge", lambda *a, **k: (_outcome(tmp_path, metrics, rows), Source()))
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["rejudge", str(source), "--judge", str(judge_file)])
    assert res.exit_code == 1
    assert "judge failed 2/2 (100%) ! > 0.1" in res.output
    from llmrec.errors import RunFailed  # the root group turns it into `error: …` and exit 1

    assert isinstance(res.exception, RunFailed) and "judge's answers could not be read" in str(res.exception)


# ---- agreement: unreadable is its own outcome; kappa refused for a judge that mostly failed ---------------------

def test_unreadable_is_counted_shown_and_kept_out_of_kappa():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 40).astype(bool)
    b = [x if i % 5 else UNREADABLE for i, x in enumerate(a)]  # B unreadable on 8 of 40, else the same as A
    pairs = pd.DataFrame({"decision": "violate", "sample_id": [f"s{i}" for i in range(40)], "unit": "",
                          "cluster": [f"u{i // 2}" for i in range(40)], "label_a": a, "label_b": b},
                         columns=PAIR_COLUMNS)
    (d,) = decision_agreement(pairs, resamples=200)
    assert d.n == 40 and d.unreadable_a == 0 and d.unreadable_b == 8 and d.n_read == 32
    assert d.labels == ["false", "true", UNREADABLE] and sum(map(sum, d.confusion)) == 40
    assert [row[2] for row in d.confusion] == [int(np.sum(~a[::5])), int(np.sum(a[::5])), 0]
    assert d.agreement == 1.0 and d.kappa == pytest.approx(1.0) and d.kappa_refused is None  # over the read ones


def test_kappa_is_refused_for_a_judge_that_mostly_failed():
    pairs = pd.DataFrame([("violate", f"s{i}", "", f"c{i}", i % 2 == 0, UNREADABLE if i else False)
                          for i in range(6)], columns=PAIR_COLUMNS)
    (d,) = decision_agreement(pairs, resamples=200)
    assert math.isnan(d.kappa) and d.unreadable_b == 5
    assert d.kappa_refused == "judge B failed 83% of its calls (5 of 6 unreadable; more than 50%)"
    every = pairs.assign(label_b=UNREADABLE)
    (d,) = decision_agreement(every, resamples=200)
    assert math.isnan(d.kappa) and math.isnan(d.agreement) and "judge B failed 100% of its calls" in d.kappa_refused


def _run(label: str, cfg: PrefEvalConfig, rows: list[dict], tmp_path: Path):
    from llmrec.pipelines.results.stored import StoredRun
    from llmrec.pipelines.runner.run_config import RunConfig

    run_cfg = RunConfig.model_validate({"benchmark": cfg.model_dump(mode="json"), "engine": SUBJECT,
                                        "output": {"dir": str(tmp_path)}})
    return StoredRun.held(tmp_path / label, label, BENCHMARK.name, name=label, run_config=run_cfg, bench=BENCHMARK,
                          rows=rows)


def test_judges_refuses_kappa_and_counts_unreadable_for_a_broken_judge(tmp_path, data_root):
    from rich.console import Console

    from llmrec.pipelines.results.judge_agreement import compare_judges, mlflow_metrics, tables

    cfg, good = _gen_rows(data_root, GOOD)
    _, broken = _gen_rows(data_root, GARBAGE)
    pair = compare_judges(_run("good", cfg, good, tmp_path), _run("broken", cfg, broken, tmp_path), data_root,
                          resamples=200)
    by = {d["decision"]: d for d in pair.agreement}
    assert set(by) == {"acknowledge", "violate", "helpful"}  # hallucinate: read only where B acknowledged
    for d in by.values():
        assert d["unreadable_a"] == 0 and d["unreadable_b"] == 2 and d["n_read"] == 0
        assert math.isnan(d["kappa"]) and d["kappa_refused"].startswith("judge B failed 100% of its calls")
        assert d["labels"][-1] == UNREADABLE  # shown in the confusion matrix, never a default label
    assert pair.judge_failure_rate_a == 0.0 and pair.judge_failure_rate_b == 1.0
    acc = next(r for r in pair.metrics if r["metric"] == "accuracy")
    assert acc["judge_failure_rate_a"] == 0.0 and acc["judge_failure_rate_b"] == 1.0 and acc["judge_over_b"]
    report = {"pairs": [pair.__dict__]}
    console = Console(record=True, width=250)
    for t in tables(report):
        console.print(t)
    text = console.export_text()
    assert "refused: judge B failed 100% of its calls" in text and "0 / 2" in text and "judge failed: A 0%, B 100%" in text
    assert "0% / 100%!" in text
    m = mlflow_metrics(report)
    assert m["violate/unreadable_b"] == 2 and m["judge_failure_rate_b"] == 1.0


def test_a_juror_whose_answer_is_unreadable_does_not_vote(data_root):
    from llmrec.pipelines.runner.judges import verdicts

    cfg, good = _gen_rows(data_root, GOOD, 1)
    _, broken = _gen_rows(data_root, GARBAGE, 1)
    fields = lambda r: {f"judge_{c}": r[f"judge_{c}"] for c in ("acknowledge", "violate", "hallucinate", "helpful")}
    got = verdicts(BENCHMARK, cfg, good[0], {"broken": fields(broken[0]), "good": fields(good[0])}, "first")
    assert got[("violate", "")] is False and got[("acknowledge", "")] is True  # the readable juror's answers


# ---- GISTBench: questions given up are judge failures and unreadable decisions ----------------------------------

def test_gistbench_counts_given_up_judge_questions():
    from llmrec.pipelines.benchmarks.gistbench.aggregate import judge_failures
    from llmrec.pipelines.registry import get_benchmark

    bench = get_benchmark("gistbench")
    missed = {"attempts": 3, "texts": ["?", "?", "?"], "answer": None, "parse_error": "x", "state": "missed"}
    ok = {"attempts": 1, "texts": ["1"], "answer": ["o1"], "parse_error": None, "state": "ok"}
    row = {"status": "ok", "interests_scored": [], "interests": [{"interest": "jazz", "item_ids": ["o1", "o2"]},
                                                                 {"interest": "hiking", "item_ids": ["o3"]}],
           "judge": {"jazz": ok, "hiking": missed},
           "specificity": {"jazz": {**missed, "test_ids": ["o1", "o9"], "backing": ["o1"]}}}
    assert judge_failures(row) == (2, 3) and bench.judge_failures(None, row) == (2, 3)
    labels = {(d.decision, d.unit): d.label for d in bench.judge_decisions(None, row)}
    assert labels[("evidence", "jazz|o1")] is True and labels[("evidence", "jazz|o2")] is False
    assert labels[("evidence", "hiking|o3")] == UNREADABLE  # given up: not "nothing kept"
    assert labels[("specificity", "jazz|o1")] == UNREADABLE and labels[("specificity", "jazz|o9")] == UNREADABLE
    assert judge_failures({"status": "failed"}) == (0, 0)


# ---- end to end: the verbs on a local Ray --------------------------------------------------------------------------

@pytest.mark.slow
def test_run_rejudge_and_judges_with_a_broken_judge_end_to_end(tmp_path, data_root, local_ray):
    import re

    import typer

    from llmrec import cli, tracking
    from llmrec.pipelines.results.judges_cli import register

    path = config(tmp_path, engine=SUBJECT, task="gen", topics=["travel_hotel"], per_topic=2, forms=["explicit"],
                  turns=[0], methods=["zero-shot"])
    raw = yaml.safe_load(path.read_text())
    raw["judge"] = GARBAGE
    raw["data"] = {"dir": str(data_root)}  # the test's data, whatever $LLMREC_DATA_DIR says
    path.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(cli.app, ["run", str(path)])
    assert res.exit_code == 1, res.output
    assert "judge failed 2/2 (100%) ! > 0.1" in res.output
    run_id = re.search(r"MLflow run (\w+)", res.output).group(1)  # the rate is an MLflow metric of the run
    assert tracking.client(raw["tracking"]["uri"]).get_run(run_id).data.metrics["judge_failure_rate"] == 1.0
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "resolved.yaml").is_file())
    # the same answers judged again by a judge that answers readably: exit 0, rate 0
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(GOOD))
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["rejudge", str(run_dir), "--judge", str(good), "--out", str(tmp_path / "good"),
                                   "--set", "tracking.enabled=false"])
    assert res.exit_code == 0, res.output
    assert "judge failed 0/2 (0%)" in res.output
    # and by the broken judge again: exit 1
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({**GARBAGE, "model": "broken2"}))
    res = CliRunner().invoke(app, ["rejudge", str(run_dir), "--judge", str(broken), "--out", str(tmp_path / "bad"),
                                   "--set", "tracking.enabled=false"])
    assert res.exit_code == 1 and "judge failed 2/2 (100%) !" in res.output
    res = CliRunner().invoke(app, ["judges", str(tmp_path / "good"), str(tmp_path / "bad"), "--no-tracking",
                                   "--resamples", "200", "--out", str(tmp_path / "agreement")])
    assert res.exit_code == 0, res.output
    assert "refused: judge B failed 100% of its calls" in " ".join(res.output.split())


def test_gistbench_run_with_a_judge_that_never_answers_readably(tmp_path):
    from llmrec.cli import summary_rows
    from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
    from llmrec.pipelines.registry import get_benchmark
    from tests.conftest import require_data
    from tests.pipelines.benchmarks.gistbench.conftest import ScriptedEngine, kind
    from tests.pipelines.benchmarks.gistbench.test_mock_pipeline import MOCK, judge_respond, run_model

    bench = get_benchmark("gistbench")
    cfg = GistbenchConfig(name="gistbench", dataset="synthetic", path=MOCK,
                          taxonomy={"cache_path": str(tmp_path / "tax.sqlite")})
    data_dir = require_data(MOCK).parents[3]
    readable = bench.aggregate(cfg, run_model("A", cfg, data_dir, ScriptedEngine(judge_respond)), None)
    assert readable["judge_failure_rate"] == 0.0 and readable["n_judged"] > 0
    garbled = ScriptedEngine(lambda req: "I cannot tell." if kind(req) != "taxonomy" else judge_respond(req))
    rows = run_model("A", cfg, data_dir, garbled)
    metrics = bench.aggregate(cfg, rows, None)
    assert metrics["judge_failure_rate"] == 1.0 and metrics["judge_failed"] == metrics["n_judged"] > 0
    shown = dict(summary_rows(metrics, {}, bench.headline_metrics, bench.judged_metrics, 0.1))
    assert set(bench.judged_metrics) <= set(shown)
    assert all("judge failed" in shown[k] and "! > 0.1" in shown[k] for k in bench.judged_metrics)
    assert jf.too_many(metrics, 0.1)


def test_a_suite_entry_whose_judge_failed_is_an_error_of_the_suite(tmp_path):
    from types import SimpleNamespace

    from llmrec.pipelines.runner.suite import _record

    logged = {}
    metrics = {"accuracy": 1.0, "judge_failure_rate": 1.0, "judge_failed": 2.0, "n_judged": 2.0}
    rows = [{"sample_id": "1", "status": "ok"}, {"sample_id": "2", "status": "ok"}]
    cfg = SimpleNamespace(execution=SimpleNamespace(max_failed_share=0.1, max_judge_failed_share=0.1))
    out = SimpleNamespace(metrics={}, errors={})
    index = SimpleNamespace(add=lambda *a: None)
    parent = SimpleNamespace(log_entry=lambda entry, m, heads: logged.update({entry: heads}))
    entry = SimpleNamespace(name="gen", benchmark={"name": "prefeval"})
    _record(cfg, "gemma", entry, _outcome(tmp_path, metrics, rows), index, parent, out)
    assert "judge failed 2/2 (100%)" in out.errors[("gemma", "gen")]
    assert "judge_failure_rate" in logged["gen"]  # beside the headline on the subject's MLflow run
