"""`llmrec view` in a real browser: the command starts the server on a free port of 127.0.0.1 and prints its
address; headless Chromium (Debian's `chromium` + `chromedriver`, driven by Selenium) filters the list to wrong
answers, opens one, and finds the prompt text and the output on its page."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.pipelines.runner.viewer_fixtures import prefeval_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="headless Chromium or chromedriver not installed (`make browser`, or "
                                       "apt-get install chromium chromium-driver)")]


def start_view(*args: str, want: str = r"at (http://127\.0\.0\.1:\d+)/samples") -> tuple[subprocess.Popen, str]:
    """`llmrec view ARGS` in a child process; returns it and the address it printed."""
    proc, m = start_view_matching(*args, want=want)
    return proc, m.group(1)


def start_view_matching(*args: str, want: str) -> tuple[subprocess.Popen, re.Match]:
    """`llmrec view ARGS` in a child process; returns it and the match of ``want`` in what it printed."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", "from llmrec.cli import main; main()", "view", *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    deadline, seen = time.time() + 120, []
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(want, line)
        if m:
            assert not m.group(1).endswith(":0")
            return proc, m
    proc.kill()
    raise AssertionError("llmrec view printed no address: " + "".join(seen)[-3000:])


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (the dev extra)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000"):
        opts.add_argument(a)
    driver = webdriver.Chrome(options=opts, service=Service(DRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_filter_to_wrong_answers_open_one_and_read_its_prompt_and_output(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    run = prefeval_run(tmp_path / "run", n=12, turns=10)
    proc, url = start_view(str(run))
    try:
        browser.get(url + "/samples")
        assert "12 sample(s)" in browser.find_element(By.ID, "count").text
        Select(browser.find_element(By.ID, "f-verdict")).select_by_value("wrong")
        browser.find_element(By.ID, "f-apply").click()
        # the filtered page replaces the list: wait for it (a loaded machine answers in seconds, not at once)
        WebDriverWait(browser, 60).until(lambda d: "verdict=wrong" in d.current_url
                                         and d.find_elements(By.CSS_SELECTOR, "#samples tbody tr"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#samples tbody tr")
        assert len(rows) == 5 and {r.get_attribute("data-verdict") for r in rows} == {"wrong"}
        assert "verdict=wrong" in browser.current_url
        assert browser.title == "llmrec view"  # the injected <script> never ran
        rows[1].find_element(By.CSS_SELECTOR, "a.sample").click()
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "sample-id"))
        assert browser.find_element(By.ID, "sample-id").text == "travel_restaurant/explicit/0005/t010/zero-shot"
        messages = [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".call .msg pre") if m.is_displayed()]
        assert "PREFERENCE 5: I strongly dislike crowded places." in messages
        assert any(m.startswith("QUESTION 5: Where should I stay on my trip?") for m in messages)
        hidden = browser.find_element(By.CSS_SELECTOR, "details.middle")
        assert not hidden.find_elements(By.CSS_SELECTOR, ".msg pre")[0].is_displayed()  # folded until opened
        hidden.find_element(By.TAG_NAME, "summary").click()
        assert hidden.find_elements(By.CSS_SELECTOR, ".msg pre")[0].text == "Unrelated question number 0 about cooking pasta."
        assert browser.find_element(By.CSS_SELECTOR, ".call .output pre").text == "<choice>A</choice>"
        assert browser.find_element(By.CSS_SELECTOR, "dd.verdict").text == "wrong"
        logs = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert logs == []
    finally:
        stop(proc)
