"""Numbers that say when they cannot say much: a CI, p-value or κ from fewer than ``stats.MIN_CLUSTERS`` clusters is
marked (run summary, ``compare``, ``judges``, leaderboard, report), and an MCQ accuracy shows its chance level."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup
from rich.console import Console

from llmrec.pipelines.common.stats import FEW, FEW_LEGEND, MIN_CLUSTERS, few_clusters
from tests.pipelines.results_fixtures import prefeval_rows, suite_dir, write_run


def _text(*renderables) -> str:
    console = Console(record=True, width=240)
    for r in renderables:
        console.print(r)
    return console.export_text()


def _line(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


def test_the_rule_is_one_constant():
    assert MIN_CLUSTERS == 10 and few_clusters(9) and not few_clusters(10)
    assert not few_clusters(None) and not few_clusters(float("nan"))  # unknown: not claimed either way
    assert f"fewer than {MIN_CLUSTERS} clusters" in FEW_LEGEND


def test_mcq_accuracy_carries_its_chance_level_and_the_units_its_ci_resampled():
    from llmrec.pipelines.benchmarks.lrworld.metrics import aggregate_lines
    from llmrec.pipelines.benchmarks.prefeval.metrics import mcq_metrics

    rows = [{"status": "ok", "correct": i % 3 == 0, "missed": False, "topic": "t"} for i in range(12)]
    m = mcq_metrics(rows)
    assert m["accuracy_chance"] == 0.25 and m["accuracy_ci_clusters"] == 12
    lines = [{"sample_id": str(i), "measure": "m", "factor": "f", "gold": "A", "options": ["x"] * k,
              "correct": i % 2 == 0, "missed": False, "parsed": "A"} for i, k in enumerate([4, 4, 10, 10])]
    out = aggregate_lines(lines)
    assert out["base/accuracy_chance"] == pytest.approx((0.25 + 0.25 + 0.1 + 0.1) / 4)
    assert out["base/accuracy_ci_clusters"] == 4


def test_run_summary_marks_a_ci_from_few_clusters_and_shows_chance(monkeypatch):
    import llmrec.cli as cli

    few = {"accuracy": 0.5, "accuracy_ci_low": 0.3, "accuracy_ci_high": 0.7, "accuracy_ci_clusters": 6.0,
           "accuracy_chance": 0.25, "n_answered": 6.0}
    rows = dict(cli.summary_rows(few, {}, ("accuracy",)))
    assert rows["accuracy"] == f"0.5000  [0.300, 0.700]{FEW}  chance 0.250"
    many = dict(few, accuracy_ci_clusters=40.0)
    assert dict(cli.summary_rows(many, {}, ("accuracy",)))["accuracy"] == "0.5000  [0.300, 0.700]  chance 0.250"

    console = Console(record=True, width=240)
    monkeypatch.setattr(cli, "console", console)
    cli._print_summary(few, {}, ("accuracy",))
    printed = console.export_text()
    assert FEW_LEGEND in " ".join(printed.split())  # the caption wraps to the table's width
    assert "chance 0.250" in printed and "accuracy_chance" not in printed  # beside the value, not a row of its own
    console = Console(record=True, width=240)
    monkeypatch.setattr(cli, "console", console)
    cli._print_summary(many, {}, ("accuracy",))
    assert FEW not in console.export_text()


def _cmp_row(metric: str, clusters: int) -> dict:
    return {"group": "g", "a": "A", "b": "B", "metric": metric, "setting": "all", "statistic": "mean",
            "n_pairs": 3 * clusters, "n_clusters": clusters, "value_a": 0.4, "value_b": 0.5, "diff": 0.1,
            "ci_low": -0.1, "ci_high": 0.3, "p": 0.2, "p_holm": 0.4, "test": "permutation-cluster"}


def test_compare_table_marks_rows_from_few_clusters():
    from llmrec.pipelines.results.compare import Comparison, table

    comp = Comparison(runs=[], rows=[_cmp_row("few_metric", 6), _cmp_row("many_metric", 12)])
    text = _text(table(comp))
    few_line, many_line = _line(text, "few_metric"), _line(text, "many_metric")
    assert few_line.count(FEW) == 3  # the CI, p and p_holm
    assert "[-0.100, 0.300]" + FEW in few_line and "0.20" + FEW in few_line
    assert FEW not in many_line
    assert "fewer than 10 clusters" in text
    alone = _text(table(Comparison(runs=[], rows=[_cmp_row("many_metric", 12)])))
    assert FEW not in alone  # no marked row, no legend


def test_judges_tables_mark_kappa_and_metrics_from_two_clusters():
    from llmrec.pipelines.results.judge_agreement import tables

    agreement = {"decision": "violate", "n": 4, "n_clusters": 2, "agreement": 0.75, "agreement_ci_low": 0.5,
                 "agreement_ci_high": 1.0, "kappa": 0.0, "kappa_ci_low": 0.0, "kappa_ci_high": 0.0,
                 "labels": ["false", "true"], "confusion": [[3, 1], [0, 0]]}
    report = {"pairs": [{"a": "A", "b": "B", "paired_samples": 4, "agreement": [agreement],
                         "metrics": [_cmp_row("accuracy", 2)]}]}
    text = _text(*tables(report))
    assert "0.000 [0.000, 0.000]" + FEW in text and "0.750 [0.500, 1.000]" + FEW in text
    assert _line(text, "accuracy").count(FEW) == 2  # the metric difference's CI and p
    assert "fewer than 10 clusters" in text
    agreement_ok = dict(agreement, n=40, n_clusters=20)
    ok = _text(*tables({"pairs": [{"a": "A", "b": "B", "paired_samples": 40, "agreement": [agreement_ok],
                                    "metrics": [_cmp_row("accuracy", 20)]}]}))
    assert FEW not in ok


def test_leaderboard_marks_few_clusters_and_shows_the_chance_level(tmp_path):
    from llmrec.pipelines.results.leaderboard import cell, leaderboard, wide

    assert cell("accuracy", 0.5, 0.3, 0.7, 40, 6).endswith(f"n=40{FEW}")  # enough units, too few clusters
    assert cell("accuracy", 0.5, 0.3, 0.7, 40, 12) == "0.500 [0.300, 0.700] n=40"
    assert cell("accuracy", 0.5, 0.3, 0.7, 40, 12, 0.25) == "0.500 [0.300, 0.700] n=40 (chance 0.250)"
    run = write_run(tmp_path / "r", "prefeval", "gemma",
                    {"accuracy": 0.8, "accuracy_ci_low": 0.4, "accuracy_ci_high": 1.0, "accuracy_ci_clusters": 5.0,
                     "accuracy_chance": 0.25, "missed_rate": 0.0, "failed": 1.0}, prefeval_rows())
    df = leaderboard([run])
    acc = df[df.metric == "accuracy"].iloc[0]
    assert acc.chance == 0.25 and acc.n_clusters < MIN_CLUSTERS
    shown = wide(df, primary_only=True).iloc[0, 2]
    assert shown.endswith(f"{FEW} (chance 0.250)"), shown


def test_report_marks_comparisons_and_judges_from_few_clusters(tmp_path):
    from llmrec.pipelines.results.html_report import render

    s = suite_dir(tmp_path)
    c = s / "comparisons" / "gemma-a--vs--gemma-b"
    doc = json.loads((c / "comparison.json").read_text())
    doc["rows"][0]["n_clusters"] = 6
    (c / "comparison.json").write_text(json.dumps(doc))
    agreement = {"decision": "violate", "n": 4, "n_clusters": 2, "agreement": 0.75, "agreement_ci_low": 0.5,
                 "agreement_ci_high": 1.0, "kappa": 0.0, "kappa_ci_low": 0.0, "kappa_ci_high": 0.0,
                 "labels": ["false", "true"], "confusion": [[3, 1], [0, 0]]}
    (c / "judges.json").write_text(json.dumps({"pairs": [{"a": "A", "b": "B", "paired_samples": 4,
                                                          "agreement": [agreement], "metrics": []}]}))
    soup = BeautifulSoup(render([s]), "html.parser")
    comp = soup.find("table", class_="comparison")
    cells = [td.text for td in comp.tbody.tr.find_all("td")]
    assert cells[5] == f"[0.020, 0.280]{FEW}" and cells[6] == f"<0.001{FEW}" and cells[8] == "40 (6)"
    judges = soup.find("table", class_="judges")
    kappa = [td.text for td in judges.tbody.tr.find_all("td")][4]  # after decision, n, unreadable, agreement
    assert kappa == f"0.000 [0.000, 0.000]{FEW}"
    notes = [p.text for p in soup.find_all("p", class_="few")]
    assert len(notes) == 2 and all("fewer than 10 clusters" in n for n in notes)
    assert "fewer than 10 clusters, too few to rank" in soup.get_text(" ")  # the leaderboard's legend


def test_runs_list_marks_a_logged_ci_from_few_clusters():
    from llmrec.pipelines.results.runs_table import value_text

    ci = {"accuracy": 0.5, "accuracy_ci_low": 0.3, "accuracy_ci_high": 0.7}
    assert value_text({**ci, "accuracy_ci_clusters": 6.0}, "accuracy") == f"0.500 [0.300, 0.700]{FEW}"
    assert value_text({**ci, "accuracy_ci_clusters": 60.0}, "accuracy") == "0.500 [0.300, 0.700]"
    assert value_text(ci, "accuracy") == "0.500 [0.300, 0.700]"  # a run logged before the count: unknown
