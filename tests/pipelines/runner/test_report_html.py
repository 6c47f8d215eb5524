"""`llmrec report`: one self-contained, escaped HTML file; each benchmark's drill-down fields."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup
from typer.testing import CliRunner

from llmrec.errors import ConfigError
from llmrec.pipelines.protocol import DRILLDOWN_FIELDS
from llmrec.pipelines.registry import BENCHMARKS
from llmrec.pipelines.results.html_report import MAX_CHARS, render
from tests.pipelines.results_fixtures import INJECTION, LONG_PREFERENCE, prefeval_rows, suite_dir, write_run
from tests.pipelines.toy.benchmark import NAME as TOY


@pytest.fixture()
def suite(tmp_path):
    return suite_dir(tmp_path)


def _soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def test_report_holds_leaderboard_plots_comparison_and_drilldown_offline(suite):
    soup = _soup(render([suite]))
    board = soup.find(id="leaderboard-table")
    rows = {tr.find_all("td")[0].text: [td.text for td in tr.find_all("td")] for tr in board.tbody.find_all("tr")}
    assert rows["gemma-a"] == ["gemma-a", "llm", "0.123 [0.010, 0.200] n=1†", "0.417 [0.217, 0.617] n=5†"]
    assert rows["user-average"][:3] == ["user-average", "baseline", "0.050 [—] n=—†"]
    assert "baseline" in board.find("tr", class_="baseline").text
    assert soup.find(id="leaderboard-all").find("th", string="prefeval_mcq: missed_rate")

    imgs = soup.find_all("img")
    assert all(i["src"].startswith("data:image/png;base64,iVBOR") for i in imgs)
    per_run = soup.find(id="plots").find_next("details").find_all("img")
    assert len(per_run) == 4  # 2 subjects × 2, folded below the overlays
    overlaid = [i["alt"] for i in imgs if i not in per_run]  # one per entry and headline metric, subjects overlaid
    assert overlaid and all(" · " in a for a in overlaid), overlaid

    comp = soup.find("table", class_="comparison")
    cells = [td.text for td in comp.tbody.tr.find_all("td")]
    assert [th.text for th in comp.thead.find_all("th")] == ["metric", "setting", "A", "B", "diff", "95% CI", "p",
                                                               "p_holm", "n (clusters)", "test"]
    assert cells == ["accuracy", "turns=10", "0.400", "0.550", "0.150", "[0.020, 0.280]", "<0.001", "<0.001", "40 (10)",
                     "mcnemar-exact"]  # A's and B's values, the difference with its CI, p as people read it
    section = comp.find_previous("h3")
    assert section.text == "A = gemma-a/prefeval_mcq, B = gemma-b/prefeval_mcq"
    page = soup.get_text(" ")
    assert "protocols differ" not in page and "allowed" not in page and "{" not in section.text  # none: not shown
    assert "dropped: gemma-b/prefeval_mcq vs gemma-a/prefeval_mcq: failed in a 1" in page

    drill = soup.find(id="drill")
    trs = drill.tbody.find_all("tr")
    assert len(trs) == 2 * 6 + 2 * 1  # every PrefEval and PerRecBench sample of both subjects; the baseline has none
    assert [th.text for th in drill.thead.find_all("th")] == ["run", "sample", "setting", "status", *DRILLDOWN_FIELDS,
                                                              "error", "transcript"]
    failed = trs[0]  # samples not ok come first
    assert failed["data-status"] == "failed" and failed["data-run"] == "gemma-a · prefeval_mcq"
    assert failed["data-setting"] == ("task=mcq,form=explicit,turns=2,method=zero-shot,position=end,extra_prefs=0,"
                                      "conflict=False")
    assert "engine timed out" in failed.text
    assert {s["id"]: [o["value"] for o in s.find_all("option")] for s in soup.find_all("select")}["f-status"] == \
        ["", "failed", "ok"]

    # no network: nothing is loaded from anywhere but the file itself
    assert not soup.find_all("link") and not soup.find_all("script", src=True)
    assert all(tag["src"].startswith("data:") for tag in soup.find_all(src=True))


def test_user_text_is_escaped_never_markup(suite):
    html = render([suite])
    assert INJECTION not in html and "<img src=x" not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html
    soup = _soup(html)
    assert INJECTION in [td.text for td in soup.find(id="drill").find_all("td")]  # shown as text
    assert len(soup.find_all("script")) == 1 and soup.find_all("img", src="x") == []  # only the report's own script


def test_long_prompts_are_cut_behind_an_expander_and_rows_are_capped(tmp_path):
    rows = prefeval_rows(6)
    run = write_run(tmp_path / "prefeval-x", "prefeval", "m", {"accuracy": 0.5}, rows)
    soup = _soup(render([run], max_rows=4))
    long_row = next(tr for tr in soup.find(id="drill").tbody.find_all("tr") if "/0003/" in tr.find_all("td")[1].text)
    details = long_row.find_all("td")[4].find("details")
    assert details is not None and len(details.summary.text) == 300 + 1  # the head and "…"
    assert len(details.pre.text) == MAX_CHARS and details.pre.text.count("I never eat meat.") > 1000
    full = BENCHMARKS.get("prefeval").drilldown(rows[3], None)["prompt"]
    assert LONG_PREFERENCE in full
    assert f"… {len(full) - MAX_CHARS} more characters not included here" in details.text
    short = long_row.find_all("td")[5]  # the answer: short, shown whole without an expander
    assert short.find("details") is None and short.text == "<choice>B</choice>"
    assert len(soup.find(id="drill").tbody.find_all("tr")) == 4
    assert "prefeval: 4 of 6 samples included (failed and wrong ones first)" in soup.text


def test_cli_writes_the_file_and_refuses_a_missing_comparison(suite, tmp_path):
    from llmrec.cli import _mount_extra_verbs, app

    _mount_extra_verbs()
    out = tmp_path / "out" / "report.html"
    res = CliRunner().invoke(app, ["report", str(suite), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 1000 and f"wrote {out}" in res.output
    bad = CliRunner().invoke(app, ["report", str(suite), "--out", str(out), "--compare", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "no comparison.json there" in bad.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "comparison.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(ConfigError, match="not a comparison file"):
        render([suite], [broken])


def test_a_drilldown_that_raises_is_shown_in_its_row(tmp_path, monkeypatch):
    bench = BENCHMARKS.get("prefeval")

    def broken(self, row, assets):
        raise KeyError("options")

    monkeypatch.setattr(type(bench), "drilldown", broken)
    run = write_run(tmp_path / "prefeval-x", "prefeval", "m", {"accuracy": 0.5}, prefeval_rows(2))
    cells = _soup(render([run])).find(id="drill").tbody.tr.find_all("td")
    assert cells[4].text == "(drilldown failed: KeyError: 'options')" and cells[3].text in ("ok", "failed")


ROWS = {
    "prefeval": (prefeval_rows(2)[0], {"answer": "<choice>B</choice>", "gold": "B. Quiet inn",
                                       "verdict": "right — the preference-consistent option; correct=True, missed=False"}),
    "perrecbench": ({"mode": "pair", "level": "hard", "user_ids": ["a", "b"], "item_id": "i", "prediction": [2, 1],
                     "relative_ratings": [0.1, 0.3], "ptc": 1.0, "exact_match": 1.0, "missed": False},
                    {"answer": "1. user b, 2. user a", "gold": "1. user b (+0.30), 2. user a (+0.10)",
                     "verdict": "right — the predicted ordering is the gold ranks; ptc=1, exact_match=1, missed=False"}),
    "gistbench": ({"n_engagements": 6, "signals": ["explicit_positive"], "user_id": "7", "dataset": "ml-100k",
                   "chunk_size": 6, "interests": [{"interest": "sci-fi", "item_ids": ["1"]}], "n_verified": 1,
                   "n_interests": 1}, {"answer": "sci-fi", "gold": None,
                                       "verdict": "1 of 1 interests verified by the judge; n_interests=1, n_verified=1"}),
    "beyond_utility": ({"user_id": "64", "history_shown": "10", "history_len": 199, "template": "history",
                        "candidates": [1, 2, 3], "order": "shuffled", "target": 3,
                        "answers": {"rank": {"attempts": 2, "texts": ["no", "I cannot rank"], "answer": None,
                                             "parse_error": "no list", "state": "missed"}},
                        "outputs": {"rank": {"text": "I cannot rank"}}},
                       {"answer": "I cannot rank", "gold": "item 3",
                        "verdict": "missed — the answer never parsed into a ranked list: no list; attempts=2, "
                                   "compliant=False"}),
    "lrworld": ({"measure": "memory_item_item/ml-100k/item", "variant": "base", "target": "Alien (1979)",
                 "options": ["Aliens (1986)", "Heat (1995)"], "kind": "hit1", "output": "1", "gold": "1",
                 "correct": True, "missed": False},
                {"answer": "1", "gold": "1. Aliens (1986)",
                 "verdict": "right — the answer is the gold option; correct=True, missed=False"}),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_benchmark_names_prompt_answer_gold_and_verdict(name):
    row, want = ROWS[name]
    view = BENCHMARKS.get(name).drilldown(row, None)
    assert set(view) == set(DRILLDOWN_FIELDS)
    assert {k: view[k] for k in want} == want
    assert isinstance(view["prompt"], str) and view["prompt"]


def test_prompts_show_the_inputs_they_are_built_from():
    prompt = BENCHMARKS.get("prefeval").drilldown(prefeval_rows(2)[0], None)["prompt"]
    assert "I avoid crowds (0)" in prompt and "[2 inter-turn exchanges]" in prompt and "B. Quiet inn" in prompt
    lr = BENCHMARKS.get("lrworld").drilldown(ROWS["lrworld"][0], None)["prompt"]
    assert "Alien (1979)" in lr and "2. Heat (1995)" in lr


def test_the_default_drilldown_reads_the_last_stage_output():
    from llmrec.pipelines import capabilities as caps

    toy = BENCHMARKS.get(TOY)
    assert not isinstance(toy, caps.Explains)  # the toy does not declare Explains: the capability's default
    view = caps.drilldown(toy, {"sample_id": "t", "outputs": {"ask": {"text": "yes"},
                                                              "loop": [{"text": "a"}, {"text": "b"}]},
                                "gold": "yes", "verdict": "fine"}, None)
    assert view == {"prompt": None, "answer": "b", "gold": "yes", "verdict": "fine"}
    assert caps.drilldown(toy, {"answer": "x", "correct": False}, None)["verdict"] is False


def test_protocol_differences_show_as_their_keys_only_when_there_are_some(suite):
    path = suite / "comparisons" / "gemma-a--vs--gemma-b" / "comparison.json"
    doc = json.loads(path.read_text())
    doc["protocol_diff"] = {"allowed": True, "differences": [
        {"a": "x", "b": "y", "key": "benchmark.truncate", "value_a": False, "value_b": True},
        {"a": "x", "b": "z", "key": "benchmark.n", "value_a": 1, "value_b": 2}]}
    path.write_text(json.dumps(doc))
    note = _soup(render([suite])).find(string=lambda t: t and "protocols differ" in t)
    assert note.strip() == "protocols differ (compared anyway) in: benchmark.n, benchmark.truncate"


def test_a_comparison_of_two_runs_names_the_pair_viewer_of_its_changed_samples(suite):
    path = suite / "comparisons" / "gemma-a--vs--gemma-b" / "comparison.json"
    doc = json.loads(path.read_text())
    doc["runs"] = [{"label": "a", "run_dir": "/runs/run a"}, {"label": "b", "run_dir": "/runs/b"}]
    path.write_text(json.dumps(doc))
    note = _soup(render([suite])).find("p", class_="pair-view")
    assert note.code.text == "llmrec view '/runs/run a' /runs/b"
    assert note.find("a", class_="viewer")["data-path"] == "/pairs?change=changed"


def test_a_run_stopped_early_says_so_with_its_decision_and_bounds(tmp_path):
    """A run execution.stop_when stopped: the leaderboard cell carries ⏹ and the share, the legend explains it, and a
    line gives the decision, the share of samples and clusters, and the confidence sequence's bounds."""
    stop = {"stop_when/decision": 1.0, "stop_when/stopped_early": 1.0, "stop_when/estimate": 0.31,
            "stop_when/lower": 0.12, "stop_when/upper": 0.5, "stop_when/margin": 0.1, "stop_when/alpha": 0.05,
            "stop_when/clusters_used": 14.0, "stop_when/clusters_total": 56.0, "stop_when/share_used": 0.25}
    early = write_run(tmp_path / "early", "prefeval", "m", {"accuracy": 0.5, **stop}, prefeval_rows(6))
    full = write_run(tmp_path / "full", "prefeval", "n", {"accuracy": 0.4}, prefeval_rows(6))
    soup = _soup(render([early, full]))
    lines = [li.text for li in soup.find(id="stopped-early").find_all("li")]
    assert len(lines) == 1 and "not worse than its baseline by more than 0.100" in lines[0]
    assert "after 25% of its samples (14 of 56 clusters)" in lines[0] and "[0.120, 0.500]" in lines[0]
    cells = [td.text for td in soup.find(id="leaderboard-table").find_all("td")]
    assert sum("⏹ 25%" in c for c in cells) == 1
    assert "stopped early by execution.stop_when" in soup.text
    assert _soup(render([full])).find(id="stopped-early") is None
