"""`llmrec leaderboard`: subject × benchmark headline metrics with CIs from suite and run directories."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from llmrec.errors import ConfigError
from llmrec.pipelines.runner.leaderboard import COLUMNS, leaderboard, load_entries, wide
from tests.pipelines.results_fixtures import suite_dir, write_run


def _row(df: pd.DataFrame, subject: str, entry: str, metric: str) -> pd.Series:
    hit = df[(df.subject == subject) & (df.entry == entry) & (df.metric == metric)]
    assert len(hit) == 1, hit
    return hit.iloc[0]


def test_suite_gives_llm_and_baseline_rows_with_their_cis(tmp_path):
    df = leaderboard([suite_dir(tmp_path)])
    assert list(df.columns) == list(COLUMNS)
    acc = _row(df, "gemma-a", "prefeval_mcq", "accuracy")
    assert acc.kind == "llm" and acc.benchmark == "prefeval"
    assert acc.value == pytest.approx(0.41666666666666663) and acc.ci_low == pytest.approx(0.21666666666666662)
    base = _row(df, "user-average", "perrecbench", "ptc")
    assert base.kind == "baseline" and base.value == 0.05 and math.isnan(base.ci_low)  # a baseline without a CI
    assert set(df[(df.entry == "perrecbench") & (df.kind == "llm")].metric) == {"ptc", "exact_match"}  # the suite's
    assert list(df[df.subject == "user-average"].metric) == ["ptc", "ptc_rank", "exact_match", "failed"]  # none listed
    assert math.isnan(_row(df, "user-average", "perrecbench", "ptc_rank").value)

    table = wide(df)
    assert list(table.subject) == ["gemma-a", "gemma-b", "user-average"]  # LLMs first, the baseline in the same table
    assert list(table.kind) == ["llm", "llm", "baseline"]
    a = table.set_index("subject").loc["gemma-a"]
    assert a["prefeval_mcq: accuracy"] == "0.417 [0.217, 0.617]"
    assert a["prefeval_mcq: failed"] == "1"  # a count: whole, no interval
    assert a["perrecbench: exact_match"] == "0.300 [—]"  # a metric computed without a CI
    base_row = table.set_index("subject").loc["user-average"]
    assert base_row["prefeval_mcq: accuracy"] == "—" and base_row["perrecbench: ptc"] == "0.050 [—]"
    assert list(wide(df, primary_only=True).columns) == ["subject", "kind", "perrecbench: ptc",  # suite.json's order
                                                         "prefeval_mcq: accuracy"]


def test_plain_run_dirs_name_the_engine_model_and_keep_two_runs_of_one_model_apart(tmp_path):
    a = write_run(tmp_path / "prefeval-aaa", "prefeval", "gemma-3-270m", {"accuracy": 0.5, "missed_rate": 0.0})
    b = write_run(tmp_path / "prefeval-bbb", "prefeval", "gemma-3-270m", {"accuracy": 0.6, "missed_rate": 0.1})
    c = write_run(tmp_path / "lrworld-ccc", "lrworld", "qwen", {"base/accuracy": 0.7, "base/accuracy_ci_low": 0.6,
                                                                 "base/accuracy_ci_high": 0.8})
    df = leaderboard([a, b, c])
    assert set(df.subject) == {"gemma-3-270m (prefeval-aaa)", "gemma-3-270m (prefeval-bbb)", "qwen"}
    assert set(df[df.subject == "qwen"].metric) == {"base/accuracy", "base/missed_rate"}  # LRWorld's headline
    assert math.isnan(_row(df, "qwen", "lrworld", "base/missed_rate").value)  # declared, not in metrics.json
    assert _row(df, "gemma-3-270m (prefeval-aaa)", "prefeval", "failed").kind == "llm"
    assert wide(df).set_index("subject").loc["qwen", "lrworld: base/missed_rate"] == "—"
    two = tmp_path / "again"
    suite_dir(two, comparison=False)
    (two / "demo_suite" / "suite.json").write_text((two / "demo_suite" / "suite.json").read_text().replace(
        '"name": "demo_suite"', '"name": "rerun"'))
    both = leaderboard([suite_dir(tmp_path, comparison=False), two / "demo_suite"])
    assert {"gemma-a (demo_suite)", "gemma-a (rerun)"} <= set(both.subject)  # one subject in two suites
    only = leaderboard([a, c], metrics=["accuracy"])
    assert list(only.metric) == ["accuracy"] and list(only.subject) == ["gemma-3-270m"]


@pytest.mark.parametrize("make, message", [
    (lambda d: d.mkdir(), "neither a run directory (metrics.json) nor a suite directory (suite.json)"),
    (lambda d: (d.mkdir(), (d / "suite.json").write_text('{"name": "s", "entries": [{"subject": "a", "benchmark": '
                                                          '"prefeval", "entry": "e", "kind": "human", "run_dir": "x"}]}')),
     "suite.json: entries.0.kind: Input should be 'llm' or 'baseline'"),
    (lambda d: (d.mkdir(), (d / "metrics.json").write_text("{}")), "no resolved.yaml with benchmark.name"),
    (lambda d: (d.mkdir(), (d / "resolved.yaml").write_text("benchmark: {name: prefeval}"),
                (d / "metrics.json").write_text("[1")), "metrics.json: cannot read it as JSON"),
])
def test_bad_input_fails_in_one_line_naming_the_file(tmp_path, make, message):
    d = tmp_path / "thing"
    make(d)
    with pytest.raises(ConfigError) as e:
        load_entries([d])
    assert message in str(e.value) and "\n" not in str(e.value) and str(d) in str(e.value)


def test_an_unfinished_suite_entry_is_left_out_with_a_warning(tmp_path, caplog):
    s = suite_dir(tmp_path, comparison=False)
    (s / "gemma-b" / "perrecbench" / "metrics.json").unlink()
    df = leaderboard([s])
    assert set(df[df.entry == "perrecbench"].subject) == {"gemma-a", "user-average"}
    assert "entries.4 (gemma-b / perrecbench): no metrics.json in" in caplog.text and "left out" in caplog.text


def _cli(args):
    from llmrec.cli import _mount_extra_verbs, app

    _mount_extra_verbs()
    return CliRunner().invoke(app, args)


def test_cli_writes_markdown_rounded_and_csv_full_precision_and_logs_to_mlflow(tmp_path):
    from llmrec import tracking

    store = f"sqlite:///{tmp_path / 'mlruns.db'}"
    s = suite_dir(tmp_path, tracking={"enabled": True, "uri": store, "artifact_root": str(tmp_path / "art")})
    res = _cli(["leaderboard", str(s)])
    assert res.exit_code == 0, res.output
    assert "0.417 [0.217, 0.617]" in res.output and "user-average" in res.output
    md = (s / "leaderboard.md").read_text()  # a single suite: files beside its suite.json
    assert "| gemma-b | llm | 0.123 [0.010, 0.200] | 0.583 [0.383, 0.783] |" in md
    assert "| user-average | baseline | 0.050 [—] | — |" in md
    csv = pd.read_csv(s / "leaderboard.csv")
    assert csv[(csv.subject == "gemma-a") & (csv.metric == "accuracy")].value.item() == 0.41666666666666663
    assert len(csv) == 2 * (3 + 2) + 4  # every headline metric, LLMs and the baseline

    client = tracking.client(store)
    exp = client.get_experiment_by_name("demo_suite")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.tags[tracking.TAG_KIND] == "leaderboard"
    assert run.data.metrics["gemma-a/prefeval_mcq/accuracy"] == pytest.approx(0.41666666666666663)
    assert run.data.metrics["user-average/perrecbench/ptc"] == 0.05
    assert "user-average/perrecbench/ptc_ci_low" not in run.data.metrics  # no CI: nothing logged for it
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"leaderboard.csv", "leaderboard.md"}


def test_cli_metric_option_and_an_unknown_metric(tmp_path):
    s = suite_dir(tmp_path, comparison=False)
    out = tmp_path / "lb"
    res = _cli(["leaderboard", str(s), "--metric", "exact_match", "--out", str(out), "--no-tracking"])
    assert res.exit_code == 0, res.output
    assert "perrecbench: exact_match" in (out / "leaderboard.md").read_text()
    assert set(pd.read_csv(out / "leaderboard.csv").metric) == {"exact_match"}
    bad = _cli(["leaderboard", str(s), "--metric", "ndcg", "--no-tracking"])
    assert bad.exit_code == 2 and "no metric ndcg in" in bad.output
    (tmp_path / "file").write_text("")
    blocked = _cli(["leaderboard", str(s), "--out", str(tmp_path / "file" / "lb"), "--no-tracking"])
    assert blocked.exit_code == 2 and "cannot write the leaderboard files" in blocked.output


@pytest.mark.parametrize("verb, teaches", [("leaderboard", ("value [CI low, CI high]", "llmrec leaderboard runs/")),
                                           ("report", ("#status=failed", "llmrec report runs/"))])
def test_help_teaches_with_an_example(verb, teaches):
    res = _cli([verb, "--help"])
    text = " ".join(res.output.replace("│", " ").split())
    assert res.exit_code == 0 and all(t in text for t in teaches), res.output
