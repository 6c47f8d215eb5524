"""The test tiers' time budget (tests/tiers.py), run on a throw-away test file in-process (pytester)."""

from __future__ import annotations

import json

import pytest

from tests.tiers import summary, tier_of

TESTS = '''
import time
import pytest

def test_quick():
    pass

def test_long_unmarked():
    time.sleep(0.6)

@pytest.mark.model
def test_long_in_its_tier():
    time.sleep(0.6)
'''


def test_a_long_test_without_a_tier_fails_the_run_and_is_named(pytester, monkeypatch, tmp_path):
    times = tmp_path / "times.jsonl"
    monkeypatch.setenv("LLMREC_TEST_BUDGET_S", "0.3")
    monkeypatch.setenv("LLMREC_TEST_TIMES", str(times))
    pytester.makepyfile(test_budget=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    model: m\n    slow: s\n")
    result = pytester.runpytest("-p", "tests.tiers")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "FAILED test budget: 1 test(s) took over 0 s" in out
    assert "test_budget.py::test_long_unmarked" in out.split("FAILED test budget")[1]
    assert "test_long_in_its_tier" not in out.split("FAILED test budget")[1]
    rows = [json.loads(line) for line in times.read_text().splitlines()]
    assert {r["nodeid"].split("::")[1]: r["tier"] for r in rows} == {
        "test_quick": "unit", "test_long_unmarked": "unit", "test_long_in_its_tier": "model"}
    text = summary([str(times)], top=2)
    assert text.splitlines()[1].endswith("test_budget.py::test_long_in_its_tier") or \
        text.splitlines()[1].endswith("test_budget.py::test_long_unmarked")
    assert "test_quick" not in text.split("per tier")[0]


def test_within_the_budget_the_run_passes(pytester, monkeypatch):
    monkeypatch.setenv("LLMREC_TEST_BUDGET_S", "30")
    monkeypatch.delenv("LLMREC_TEST_TIMES", raising=False)
    pytester.makepyfile(test_budget=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    model: m\n    slow: s\n")
    result = pytester.runpytest("-p", "tests.tiers")
    assert result.ret == pytest.ExitCode.OK
    assert "tiers (test time, summed over workers): model 1 tests" in result.stdout.str()


def test_tier_of_markers():
    assert tier_of({}) == "unit"
    assert tier_of({"slow": 1}) == "integration"
    assert tier_of({"slow": 1, "model": 1}) == "model"
    assert tier_of({"browser": 1, "integration": 1}) == "browser"


def test_a_tier_told_to_wait_runs_its_tests_once_the_hand_off_file_exists(pytester, monkeypatch, tmp_path):
    """The vllm_cpu tier's side of the hand-off: collected, then waiting for the file before its first test."""
    import threading
    import time

    go = tmp_path / "go"
    monkeypatch.setenv("LLMREC_TIER_WAIT_FOR", str(go))
    monkeypatch.delenv("LLMREC_TEST_TIMES", raising=False)
    pytester.makepyfile(test_wait=f'''
from pathlib import Path

def test_runs_after_the_file():
    assert Path({str(go)!r}).exists()
''')
    threading.Timer(1.5, go.touch).start()
    t0 = time.monotonic()
    result = pytester.runpytest("-p", "tests.tiers", "-s")
    assert result.ret == pytest.ExitCode.OK and time.monotonic() - t0 >= 1.5
    assert "[tier hand-off] waited" in result.stdout.str()
    go.unlink()
    assert pytester.runpytest("-p", "tests.tiers", "--collect-only").ret == pytest.ExitCode.OK  # no wait to list


@pytest.mark.integration  # pytest-xdist's worker processes
def test_the_slow_tier_hands_off_when_its_first_worker_has_no_files_left(pytester, monkeypatch, tmp_path):
    """The slow tier's side: with two workers, one file each, the file that takes longer is still running when the
    other worker goes down and the hand-off file is created."""
    go = tmp_path / "go"
    monkeypatch.setenv("LLMREC_TIER_HANDOFF", str(go))
    monkeypatch.delenv("LLMREC_TEST_TIMES", raising=False)
    pytester.makepyfile(test_short="def test_short():\n    pass\n", test_long=f'''
import time
from pathlib import Path

def test_long():
    deadline = time.monotonic() + 60
    while not Path({str(go)!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert Path({str(go)!r}).exists()
''')
    result = pytester.runpytest("-p", "tests.tiers", "-n", "2", "--dist", "loadfile")
    result.assert_outcomes(passed=2)
