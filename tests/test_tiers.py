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


def test_a_test_skipped_in_one_tier_and_run_in_another_counts_once(tmp_path):
    skipped, ran = tmp_path / "slow.jsonl", tmp_path / "vllm.jsonl"
    skipped.write_text(json.dumps({"nodeid": "t.py::test_v", "tier": "vllm_cpu", "seconds": 0.001}) + "\n")
    ran.write_text(json.dumps({"nodeid": "t.py::test_v", "tier": "vllm_cpu", "seconds": 80.0}) + "\n"
                   + json.dumps({"nodeid": "t.py::test_w", "tier": "vllm_cpu", "seconds": 20.0}) + "\n")
    text = summary([str(skipped), str(ran)])
    assert text.splitlines()[-1] == "test time per tier: vllm_cpu 100 s (2 tests)"
    assert text.count("t.py::test_v") == 1
