"""`llmrec leaderboard`: subject × benchmark headline metrics with CIs from suite and run directories."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from llmrec.errors import ConfigError
from llmrec.pipelines.results.leaderboard import COLUMNS, leaderboard, load_entries, wide
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
    assert a["prefeval_mcq: accuracy"] == "0.417 [0.217, 0.617] n=5†"  # 5 answered samples: too few to rank
    assert a["prefeval_mcq: failed"] == "1"  # a count: whole, no interval
    # a metric computed without a CI, whose one unit gives no bootstrap either
    assert a["perrecbench: exact_match"] == "0.300 [—] n=1†"
    base_row = table.set_index("subject").loc["user-average"]
    assert base_row["prefeval_mcq: accuracy"] == "—" and base_row["perrecbench: ptc"] == "0.050 [—] n=—†"
    assert acc.n == 5 and acc.n_clusters == 5 and acc.ci_source == "benchmark"
    assert _row(df, "gemma-a", "prefeval_mcq", "failed").n == 6  # a count: of every sample
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


def test_cli_writes_markdown_rounded_and_csv_full_precision_and_logs_to_mlflow(tmp_path, monkeypatch):
    from llmrec import tracking

    store = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.chdir(tmp_path)  # the reader's own default artifact root
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)  # the reader's store (the runs' config names it too: not used)
    s = suite_dir(tmp_path, tracking={"enabled": True, "uri": store, "artifact_root": str(tmp_path / "art")})
    res = _cli(["leaderboard", str(s)])
    assert res.exit_code == 0, res.output
    assert "0.417 [0.217, 0.617] n=5†" in res.output and "user-average" in res.output
    md = (s / "leaderboard.md").read_text()  # a single suite: files beside its suite.json
    assert "| gemma-b | llm | 0.123 [0.010, 0.200] n=1† | 0.583 [0.383, 0.783] n=5† |" in md
    assert "| user-average | baseline | 0.050 [—] n=—† | — |" in md
    assert "†: n < 30 or fewer than 10 clusters, too few to rank" in md
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


def test_cli_tracking_uri_logs_to_another_store(tmp_path):
    from llmrec import tracking

    own = f"sqlite:///{tmp_path / 'own.db'}"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    s = suite_dir(tmp_path, tracking={"enabled": True, "uri": own, "artifact_root": str(tmp_path / "art")})
    res = _cli(["leaderboard", str(s), "--tracking-uri", other])
    assert res.exit_code == 0, res.output
    exp = tracking.client(other).get_experiment_by_name("demo_suite")
    (run,) = tracking.client(other).search_runs([exp.experiment_id])
    assert run.data.tags[tracking.TAG_KIND] == "leaderboard"
    assert not (tmp_path / "own.db").exists()  # the runs' own store was not touched


def test_cli_metric_option_and_an_unknown_metric(tmp_path):
    s = suite_dir(tmp_path, comparison=False)
    out = tmp_path / "lb"
    res = _cli(["leaderboard", str(s), "--metric", "exact_match", "--out", str(out), "--no-tracking"])
    assert res.exit_code == 0, res.output
    assert "perrecbench: exact_match" in (out / "leaderboard.exact_match.md").read_text()
    assert set(pd.read_csv(out / "leaderboard.exact_match.csv").metric) == {"exact_match"}
    assert not (out / "leaderboard.md").exists()  # the default files are the default selection's only
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


def _toy_run(d, answers: list[bool]):
    """A toy run directory with one sample per answer (index i: cluster c{i // 2}), no CI in its metrics."""
    from tests.pipelines.toy.benchmark import NAME

    rows = [{"sample_id": f"toy-{i}", "index": i, "kind": "even" if i % 2 == 0 else "odd", "status": "ok",
             "correct": ok} for i, ok in enumerate(answers)]
    return write_run(d, NAME, d.name, {"accuracy": sum(answers) / len(answers), "failed": 0.0}, rows)


def test_every_cell_has_n_and_a_ci_and_small_cells_are_marked(tmp_path):
    big = _toy_run(tmp_path / "big", [i % 3 != 0 for i in range(60)])
    small = _toy_run(tmp_path / "small", [True, False, True, True])
    df = leaderboard([big, small]).set_index("subject")
    acc = df[df.metric == "accuracy"]
    assert acc.loc["big", "n"] == 60 and acc.loc["big", "n_clusters"] == 30
    assert acc.loc["big", "ci_source"] == "cluster bootstrap"  # the toy's metrics hold no CI
    assert acc.loc["big", "ci_low"] < acc.loc["big", "value"] < acc.loc["big", "ci_high"]
    assert acc.loc["small", "n"] == 4
    cells = wide(leaderboard([big, small])).set_index("subject")
    assert cells.loc["big", "toy: accuracy"].endswith(" n=60")  # ranked
    assert cells.loc["small", "toy: accuracy"].startswith("0.750 [") and \
        cells.loc["small", "toy: accuracy"].endswith(" n=4†")  # too few to rank
    assert cells.loc["small", "toy: failed"] == "0"  # a count: no CI, no n, never marked


def test_metric_files_go_beside_the_defaults_and_mlflow_keeps_one_record(tmp_path, monkeypatch):
    from llmrec import tracking

    store = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    s = suite_dir(tmp_path, tracking={"enabled": True, "uri": store, "artifact_root": str(tmp_path / "art")})
    assert _cli(["leaderboard", str(s)]).exit_code == 0
    default = (s / "leaderboard.md").read_text()
    res = _cli(["leaderboard", str(s), "--metric", "exact_match"])
    assert res.exit_code == 0, res.output
    assert (s / "leaderboard.md").read_text() == default  # never over the default files
    assert "perrecbench: exact_match" in (s / "leaderboard.exact_match.md").read_text()
    assert (s / "leaderboard.exact_match.csv").is_file()
    assert _cli(["leaderboard", str(s)]).exit_code == 0  # again: the same record, updated
    client = tracking.client(store)
    runs = client.search_runs([client.get_experiment_by_name("demo_suite").experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["leaderboard · demo_suite",
                                                      "leaderboard · demo_suite · exact_match"]
    main = next(r for r in runs if r.info.run_name == "leaderboard · demo_suite")
    history = client.get_metric_history(main.info.run_id, "gemma-a/prefeval_mcq/accuracy")
    assert [m.step for m in history] == [0, 1]
    assert main.data.metrics["gemma-a/prefeval_mcq/accuracy_n"] == 5
