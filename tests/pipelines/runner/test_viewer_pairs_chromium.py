"""`llmrec view A B` and `llmrec view RUN --annotate` in a real browser (Debian's headless Chromium and
chromedriver, driven by Selenium): the changed samples of two runs with both verdicts and a highlighted diff; three
labels written, seen again after a reload, and measured by `llmrec judges RUN --human`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from llmrec.rundir import RunDir
from tests.conftest import REPO
from tests.pipelines.runner.test_viewer_chromium import (CHROMIUM, DRIVER, browser, start_view_matching,  # noqa: F401
                                                        stop)
from tests.pipelines.runner.test_viewer_pairs import sid, two_runs
from tests.pipelines.runner.viewer_fixtures import prefeval_run

pytestmark = [pytest.mark.slow, pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason="headless Chromium or chromedriver not "
                                 "installed (`make browser`, or apt-get install chromium chromium-driver)")]


def start(*args: str, want: str) -> tuple[subprocess.Popen, re.Match]:
    """`llmrec view ARGS` in a child process (test_viewer_chromium's), and the match of ``want`` in what it printed."""
    return start_view_matching(*args, want=want)


def test_the_changed_samples_of_two_runs_with_both_verdicts_and_a_highlighted_diff(tmp_path, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    a, b = two_runs(tmp_path)
    proc, m = start(str(a), str(b), want=r"at (http://127\.0\.0\.1:\d+)/pairs")
    try:
        browser.get(m.group(1) + "/")
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "pairs"))
        assert "10 sample(s)" in browser.find_element(By.ID, "count").text
        Select(browser.find_element(By.ID, "f-change")).select_by_value("changed")
        browser.find_element(By.ID, "f-apply").click()
        WebDriverWait(browser, 60).until(lambda d: "change=changed" in d.current_url)
        rows = browser.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")
        got = [(r.find_element(By.CSS_SELECTOR, "a.sample").text, r.get_attribute("data-change"),
                r.find_elements(By.CSS_SELECTOR, "td.va")[0].text, r.find_elements(By.CSS_SELECTOR, "td.va")[1].text)
               for r in rows]
        assert got == [(sid(0), "right→wrong", "right", "wrong"), (sid(6), "right→wrong", "right", "wrong"),
                       (sid(5), "wrong→right", "wrong", "right")]
        rows[0].find_element(By.CSS_SELECTOR, "a.sample").click()
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "verdicts"))
        verdicts = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#verdicts td.verdict")]
        assert verdicts == ["right", "wrong"]
        dels = browser.find_elements(By.CSS_SELECTOR, ".output-diff del")
        inss = browser.find_elements(By.CSS_SELECTOR, ".output-diff ins")
        assert [d.text for d in dels] == ["B"] and [i.text for i in inss] == ["A"]
        # highlighted: the inserted and deleted words have a background of their own
        for el in dels + inss:
            assert el.value_of_css_property("background-color") not in ("rgba(0, 0, 0, 0)", "transparent")
        assert len(browser.find_elements(By.CSS_SELECTOR, ".sides .side .call")) == 2
        assert [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"] == []
    finally:
        stop(proc)


def test_three_labels_are_written_seen_after_a_reload_and_measured_by_judges_human(tmp_path, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run = prefeval_run(tmp_path / "run", n=8)
    metrics = (run / RunDir.METRICS).read_bytes()
    proc, m = start(str(run), "--annotate", "--who", "ana",
                    want=r"open (http://127\.0\.0\.1:\d+)/samples\?token=(\S+)")
    base, token = m.group(1), m.group(2)
    try:
        browser.get(f"{base}/samples?token={token}")  # the token becomes this browser's cookie
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "samples"))
        for i, label in ((0, "wrong"), (1, "wrong"), (4, "right")):
            browser.get(f"{base}/sample?run=0&id={sid(i)}")  # no token in the address
            WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "form.label-form"))
            f = browser.find_element(By.CSS_SELECTOR, "form.label-form[data-decision=verdict]")
            f.find_element(By.CSS_SELECTOR, f"input[name=label][value={label}]").click()
            f.find_element(By.CSS_SELECTOR, "input[name=comment]").send_keys(f"checked sample {i}")
            f.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#label-table tr.label"))
        browser.refresh()
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#label-table tr.label"))
        browser.get(f"{base}/samples")
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "samples"))
        shown = {r.find_element(By.CSS_SELECTOR, "a.sample").text: r.find_element(By.CSS_SELECTOR, "td.labels").text
                 for r in browser.find_elements(By.CSS_SELECTOR, "#samples tbody tr")}
        assert {k: v for k, v in shown.items() if v} == {sid(0): "verdict: wrong", sid(1): "verdict: wrong",
                                                         sid(4): "verdict: right"}
    finally:
        stop(proc)
    lines = [json.loads(x) for x in (run / RunDir.LABELS).read_text().splitlines()]
    assert [(x["sample_id"], x["label"], x["who"], x["comment"]) for x in lines] == [
        (sid(0), "wrong", "ana", "checked sample 0"), (sid(1), "wrong", "ana", "checked sample 1"),
        (sid(4), "right", "ana", "checked sample 4")]
    assert (run / RunDir.METRICS).read_bytes() == metrics
    res = subprocess.run([sys.executable, "-c", "from llmrec.cli import main; main()", "judges", str(run), "--human",
                          "--no-tracking", "--resamples", "200", "--out", str(tmp_path / "out")], cwd=REPO,
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="200"))
    assert res.returncode == 0, res.stdout + res.stderr
    # scored right, wrong, right; labelled wrong, wrong, right: agreement 2/3, κ = (2/3 − 4/9) / (1 − 4/9) = 0.4
    assert "judge against people" in res.stdout
    assert re.search(r"verdict\s.*0\.667 \[.*0\.400 \[", res.stdout), res.stdout
