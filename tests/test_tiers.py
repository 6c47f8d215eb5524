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


def test_the_longest_files_come_first_each_files_tests_in_their_order(pytester, monkeypatch, tmp_path):
    """``--dist loadfile`` hands out files in collection order: the recorded long file first, then by tier."""
    import tests.tiers as tiers

    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"test_b_recorded.py": 300}))
    monkeypatch.setattr(tiers, "DURATIONS", durations)
    pytester.makepyfile(test_a_units="def test_1(): pass\ndef test_2(): pass\n",
                        test_b_recorded="def test_3(): pass\ndef test_4(): pass\n",
                        test_c_model="import pytest\n@pytest.mark.model\ndef test_5(): pass\ndef test_6(): pass\n")
    pytester.makeini("[pytest]\nmarkers =\n    model: m\n    slow: s\n")
    result = pytester.inline_run("--collect-only", "-p", "tests.tiers", plugins=[tiers])
    order = [i.name for i in result.getcalls("pytest_collection_finish")[0].session.items]
    assert order == ["test_3", "test_4", "test_5", "test_6", "test_1", "test_2"]


def test_durations_sum_each_files_slow_tests(tmp_path):
    from tests.tiers import durations

    times = tmp_path / "t.jsonl"
    times.write_text("\n".join(json.dumps(r) for r in (
        {"nodeid": "a.py::x", "tier": "model", "seconds": 20.0}, {"nodeid": "a.py::y", "tier": "model", "seconds": 5.5},
        {"nodeid": "b.py::z", "tier": "unit", "seconds": 30.0}, {"nodeid": "c.py::w", "tier": "integration",
                                                                  "seconds": 2.0})))
    assert durations([str(times)]) == {"a.py": 26}
