"""The results loop a user follows: a suite of two subjects (fake engine, toy benchmark, local Ray), then
`llmrec compare SUITE` (written under the suite's comparisons folder), `llmrec report SUITE` (which finds it and shows
both subjects' values) and `llmrec leaderboard SUITE` (n in every cell)."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from typer.testing import CliRunner

from llmrec.rundir import RunDir, SuiteDir


def _cli(args):
    from llmrec.cli import _mount_extra_verbs, app

    _mount_extra_verbs()
    return CliRunner().invoke(app, args, env={"COLUMNS": "100"})


@pytest.mark.slow
@pytest.mark.integration
def test_suite_then_compare_then_report_then_leaderboard(tmp_path, local_ray):
    from llmrec import tracking
    from llmrec.pipelines.runner.suite import run_suite
    from llmrec.pipelines.runner.suite_config import load_suite_config
    from tests.pipelines.runner.test_suite import suite_file

    cfg = load_suite_config(suite_file(tmp_path))  # subject a answers yes (correct), b answers no
    out = run_suite(cfg)
    assert not out.errors, out.errors
    suite = tmp_path / "runs" / "s1"
    assert SuiteDir.is_suite(suite)

    # a reader logs to the reader's store (flag, $MLFLOW_TRACKING_URI, default), never to the one the runs name
    res = _cli(["compare", str(suite), "--resamples", "200", "--tracking-uri", cfg.tracking.uri])
    assert res.exit_code == 0, res.output
    written = suite / SuiteDir.COMPARISONS / "a--vs--b" / "comparison.json"
    assert written.is_file(), res.output
    for subject in ("a", "b"):  # nothing written into a compared run
        for entry in ("t1", "t2", "t3"):
            assert not (suite / subject / entry / RunDir.COMPARISONS).exists()
    assert max(map(len, res.output.splitlines())) <= 100  # fitted to the terminal
    assert "test: exact McNemar, paired permutation" in " ".join(res.output.split())  # the tests, in the title
    client = tracking.client(cfg.tracking.uri)
    names = [r.info.run_name for r in client.search_runs([client.get_experiment_by_name("s1").experiment_id])
             if r.data.tags.get(tracking.TAG_KIND) == "compare"]
    assert names == ["compare · a vs b (3 entries)"]

    html = tmp_path / "r.html"
    res = _cli(["report", str(suite), "--out", str(html)])
    assert res.exit_code == 0, res.output
    soup = BeautifulSoup(html.read_text(encoding="utf-8"), "html.parser")
    table = soup.find("table", class_="comparison")
    assert table is not None, "the report did not find the comparison"
    head = [th.text for th in table.thead.find_all("th")]
    assert head[:4] == ["A vs B", "metric", "setting", "A"] and "B" in head and "p_holm" in head
    rows = [[td.text for td in tr.find_all("td")] for tr in table.tbody.find_all("tr")]
    accuracy = [dict(zip(head, r)) for r in rows if r[1] == "accuracy" and r[2] == "all"]
    assert {r["A vs B"] for r in accuracy} == {f"a/{e} vs b/{e}" for e in ("t1", "t2", "t3")}
    assert {(r["A"], r["B"]) for r in accuracy} == {("1.000", "0.000")}  # both subjects' values
    assert "protocols differ" not in html.read_text(encoding="utf-8")

    res = _cli(["leaderboard", str(suite), "--no-tracking"])
    assert res.exit_code == 0, res.output
    md = (suite / "leaderboard.md").read_text()
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    head = [c.strip() for c in lines[0].split("|")[1:-1]]
    metric = [i for i, h in enumerate(head) if ": " in h and not h.endswith("cost/1k")]  # not the cost columns
    cells = [[c.strip() for c in line.split("|")[1:-1]][i] for line in lines[2:] for i in metric]
    assert cells and all(re.search(r" n=\d+†?$", c) for c in cells), md
    cost = [i for i, h in enumerate(head) if h.endswith("cost/1k")]  # each run's ledger beside its headline
    assert len(cost) == 3 and all([c.strip() for c in lines[2].split("|")[1:-1]][i].endswith("tok") for i in cost)
    assert {re.search(r"n=(\d+)", c).group(1) for c in cells} == {"4", "6", "3"}
    assert "n=" in res.output
