"""Explains.explain: one stored sample as people read it (answer, gold, verdict right / wrong / missed / failed,
reason and the numbers behind it), the default and each benchmark's."""

from __future__ import annotations

import pytest

from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import Benchmark, Explanation, choice_verdict
from llmrec.pipelines.registry import BENCHMARKS


def test_the_one_verdict_rule():
    assert [choice_verdict(c, m) for c, m in ((True, False), (False, False), (False, True), (None, None))] == \
        ["right", "wrong", "missed", None]


def test_the_default_fails_from_status_and_reads_correct_and_missed():
    b = caps.Explains()  # the capability's default: what a benchmark without Explains gets too
    assert caps.explain(Benchmark(), {"status": "ok", "correct": True}).verdict == "right"
    failed = b.explain({"status": "over_context", "failed_stage": "answer", "error": None})
    assert failed.verdict == "failed" and "over_context in answer" in failed.reason
    assert b.explain({"status": "ok", "correct": False, "missed": False, "output": "x", "gold": "y"}) == \
        Explanation(answer="x", gold="y", verdict="wrong", numbers={"correct": False, "missed": False})
    assert b.explain({"outputs": {"ask": [{"text": "a"}, {"text": "b"}]}}).answer == "b"
    assert Explanation(verdict="wrong", reason="why", numbers={"p": 0.25, "n": None}).words() == "wrong — why; p=0.25"


@pytest.mark.parametrize("name", ["prefeval", "perrecbench", "beyond_utility", "lrworld", "gistbench"])
def test_every_benchmark_says_failed_for_a_failed_sample(name):
    ex = BENCHMARKS.get(name).explain({"sample_id": "s", "status": "failed", "error": "engine timed out"})
    assert ex.verdict == "failed" and "engine timed out" in ex.reason


def test_prefeval_generation_words_the_judge():
    ex = BENCHMARKS.get("prefeval").explain({
        "task": "gen", "status": "ok", "output": "Try the steakhouse.", "preference": "I am vegetarian.",
        "judge_answers": {"acknowledge": "No", "violate": "Yes", "hallucinate": "No", "helpful": "Yes"},
        "correct": False, "acknowledged": False, "violated": True, "unaware_violation": True, "judge_failed": False})
    assert ex.verdict == "wrong" and ex.gold == "respects: I am vegetarian."
    assert "acknowledged the preference: No" in ex.reason and "violated the preference: Yes" in ex.reason
    assert "unaware violation" in ex.reason and ex.numbers["violated"] is True


def test_beyond_utility_items_are_titles_for_llm_and_baseline_rows():
    bu = BENCHMARKS.get("beyond_utility")
    base = {"status": "ok", "candidates": [11, 12, 13], "candidate_titles": ["Heat", "Alien", "Up"], "target": 12,
            "target_title": "Alien"}
    baseline = bu.explain({**base, "ranked": [13, 12]})
    assert baseline.answer == "1. Up; 2. Alien" and baseline.gold == "Alien" and baseline.verdict == "right"
    assert "ranked 2 of 2" in baseline.reason
    llm = bu.explain({**base, "answers": {"rank": {"attempts": 1, "texts": ["1. Heat"], "answer": ["Heat"],
                                                   "parse_error": None, "state": "done"}}})
    assert llm.answer == "1. Heat" and llm.verdict == "wrong" and llm.numbers["attempts"] == 1
    old = bu.explain({"status": "ok", "candidates": [11, 12], "target": 12, "ranked": [11]})  # stored before titles
    assert old.answer == "1. item 11" and old.gold == "item 12" and old.verdict == "wrong"


def test_perrecbench_baselines_carry_their_own_setting():
    prb = BENCHMARKS.get("perrecbench")
    sample = {"sample_id": "g1/list", "group_id": "g1", "level": "easy", "mode": "list", "size": 2, "item_id": "i",
              "window": [0, 1], "user_ids": ["7", "9"], "relative_ratings": [0.5, -0.5], "avg_ratings": [3.0, 4.0],
              "ratings": [3.5, 3.5], "item_avg_ratings": [3.5, 3.5],
              "setting": {"level": "easy", "mode": "list"}}
    rows = prb.baselines(prb.config_cls.model_validate({"name": "perrecbench"}), [sample], None)
    for row in rows.values():
        assert row[0]["setting"] == {"level": "easy", "mode": "point"}
    ex = prb.explain(rows["item_avg"][0])
    assert ex.gold == "1. user 7 (+0.50), 2. user 9 (-0.50)" and ex.verdict in ("right", "wrong", "missed")
