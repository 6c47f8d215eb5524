"""The report in a real browser: headless Chromium (Debian's `chromium`) loads it without a console message,
its screenshot shows the leaderboard, and a filter given in the URL hash hides the other rows."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from llmrec.pipelines.results.html_report import write_report
from tests.pipelines.results_fixtures import suite_dir

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")]
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? (.*)")  # Chromium's log line for every console message / uncaught error


def chromium(tmp: Path, url: str, *args: str) -> tuple[str, list[str]]:
    """Load ``url`` headless; returns stdout (the DOM with --dump-dom) and the page's console messages."""
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0",
                          "--window-size=1400,900", *args, url],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout, [m.group(1) for m in map(CONSOLE.search, res.stderr.splitlines()) if m]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    return write_report([suite_dir(tmp)], tmp / "report.html")


def test_loads_without_console_errors_and_shows_the_leaderboard(report, tmp_path):
    dom, console = chromium(tmp_path, report.as_uri(), "--dump-dom")
    assert console == []
    soup = BeautifulSoup(dom, "html.parser")
    assert soup.body["data-ready"] == "1"  # the report's script ran to its end
    subjects = [tr.td.text for tr in soup.find(id="leaderboard-table").tbody.find_all("tr")]
    assert subjects == ["gemma-a", "gemma-b", "user-average"]
    assert soup.find(id="f-count").text == "14 of 14 rows shown"

    shot = tmp_path / "shot.png"
    chromium(tmp_path, report.as_uri(), f"--screenshot={shot}")
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 900)
    assert len(img.getcolors(maxcolors=1 << 20)) > 50  # text and table lines, not a blank page
    top = img.crop((0, 0, 1400, 450))  # the leaderboard sits in the first screen: its header cells are grey
    assert (0xF3, 0xF3, 0xF5) in {c for _, c in top.getcolors(maxcolors=1 << 20)}


def test_a_filter_in_the_url_hides_the_other_rows(report, tmp_path):
    dom, console = chromium(tmp_path, report.as_uri() + "#status=failed&run=gemma-b%20%C2%B7%20prefeval_mcq",
                            "--dump-dom")
    assert console == []
    soup = BeautifulSoup(dom, "html.parser")
    rows = soup.find(id="drill").tbody.find_all("tr")
    shown = [r for r in rows if not r.has_attr("hidden")]
    assert [(r["data-run"], r["data-status"]) for r in shown] == [("gemma-b · prefeval_mcq", "failed")]
    assert len(rows) == 14 and soup.find(id="f-count").text == "1 of 14 rows shown"


def test_the_console_check_catches_a_broken_script(report, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(report.read_text().replace('document.body.setAttribute("data-ready", "1");',
                                                 'document.body.setAttribute("data-ready", "1"); notAFunction();'))
    _, console = chromium(tmp_path, broken.as_uri(), "--dump-dom")
    assert any("Uncaught ReferenceError: notAFunction is not defined" in m for m in console), console
