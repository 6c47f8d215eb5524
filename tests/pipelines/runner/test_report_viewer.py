"""The report and the viewer together: leaderboard values and drill-down rows name the viewer's filtered paths,
the drill-down's cells are the benchmark's explain() words, transcripts of failed and wrong samples are embedded
(escaped) up to a stated cap, and `llmrec leaderboard` names `llmrec view`."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from bs4 import BeautifulSoup

from llmrec.pipelines.results.html_report import render
from tests.pipelines.runner.viewer_fixtures import IMG, SCRIPT, prefeval_run, suite_of


def suite(tmp_path):
    a = prefeval_run(tmp_path / "alpha" / "prefeval_mcq", n=8, turns=10, model="model-a")
    b = prefeval_run(tmp_path / "beta" / "prefeval_mcq", n=6, model="model-b")
    return suite_of(tmp_path, {("alpha", "prefeval_mcq"): a, ("beta", "prefeval_mcq"): b})


def test_links_words_and_embedded_transcripts(tmp_path):
    html = render([suite(tmp_path)])
    soup = BeautifulSoup(html, "html.parser")
    # leaderboard values link to the viewer's list of that subject's entry
    cells = soup.find(id="leaderboard-table").find_all("a", class_="viewer")
    paths = {a["data-path"] for a in cells}
    assert paths == {"/samples?subject=alpha&entry=prefeval_mcq", "/samples?subject=beta&entry=prefeval_mcq"}
    assert "llmrec view " + str(tmp_path) in soup.find(id="viewer-command").text
    # drill-down: failed first, then wrong; verdict cells in words; each sample id names its viewer page
    rows = soup.find(id="drill").tbody.find_all("tr")
    alpha = [r for r in rows if r["data-run"] == "alpha · prefeval_mcq"]
    assert [r["data-verdict"] for r in alpha] == ["failed", "wrong", "wrong", "wrong", "missed", "right", "right",
                                                  "right"]
    link = alpha[1].find("a", class_="viewer")["data-path"]
    q = parse_qs(urlparse(link).query)
    assert urlparse(link).path == "/sample" and q["subject"] == ["alpha"] and q["entry"] == ["prefeval_mcq"]
    cells = [td.get_text(" ", strip=True) for td in alpha[1].find_all("td")]
    assert any(c.startswith("wrong — chose A, the preference-consistent option is B; correct=False") for c in cells)
    assert "B. A quiet countryside inn" in cells
    # the embedded transcript: every message, escaped
    t = alpha[1].find("td", class_="transcript")
    assert t.details is not None
    assert "PREFERENCE" in t.text and "QUESTION" in t.text
    assert soup.find(id="f-verdict") is not None
    note = soup.find(id="transcripts-note").text
    assert "14 sample(s)" in note and "up to 5.0 MB" in note
    # nothing injected runs: no script but the report's own, no img but the report's own plots
    assert SCRIPT not in html and "<img src=x" not in html
    assert len(soup.find_all("script")) == 1
    assert all(i["src"].startswith("data:image/png;base64,") and not i.get("onerror") for i in soup.find_all("img"))
    assert any((SCRIPT + IMG) in pre.text for pre in soup.find_all("pre"))


def test_the_cap_bounds_the_embedded_transcripts(tmp_path):
    html = render([suite(tmp_path)], transcript_mb=0.02)
    soup = BeautifulSoup(html, "html.parser")
    embedded = [r for r in soup.find(id="drill").tbody.find_all("tr") if r.find("td", class_="transcript").details]
    assert 0 < len(embedded) < 14
    # failures and wrong answers first
    assert embedded[0]["data-verdict"] == "failed"
    assert re.search(r"\d+ more left out over the cap", soup.find(id="transcripts-note").text)


def test_leaderboard_names_llmrec_view(tmp_path):
    from typer.testing import CliRunner

    from llmrec.cli import _mount_extra_verbs, app

    if not any(c.name == "leaderboard" for c in app.registered_commands):
        _mount_extra_verbs()
    root = suite(tmp_path)
    res = CliRunner().invoke(app, ["leaderboard", str(root), "--out", str(tmp_path / "lb"), "--no-tracking"])
    assert res.exit_code == 0, res.output
    assert f"llmrec view {root}" in " ".join(res.output.split())
