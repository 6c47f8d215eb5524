"""Score formulas: the reference's golden cases, category aggregation, oracle union, summaries."""

from __future__ import annotations

import json

import pytest

from llmrec.pipelines.benchmarks.gistbench import scoring
from llmrec.pipelines.benchmarks.gistbench.taxonomy import own_category


def rec(name, cat, verified, correct=0, backing=0):
    return {"interest": name, "category_id": cat, "verified": verified, "correct": correct, "backing": backing}


def hm(a, b):
    return 2 * a * b / (a + b)


def test_reference_golden_without_taxonomy():
    # reference tests/test_smoke.py: each interest its own category, oracle 3
    recs = [rec("Guitar", own_category("Guitar"), True, 4, 5), rec("Hiking", own_category("Hiking"), True, 3, 5),
            rec("Bogus", own_category("Bogus"), False, 0, 0)]
    s = scoring.user_score(recs, 3)
    assert s["ig_p"] == pytest.approx(2 / 3) and s["ig_r"] == pytest.approx(2 / 3)
    assert s["ig_f1"] == pytest.approx(2 / 3)
    assert s["is"] == pytest.approx(0.7)
    assert s["hm"] == pytest.approx(hm(2 / 3, 0.7))


def test_reference_golden_with_taxonomy():
    recs = [rec("guitar", 1, True, 4, 5), rec("piano", 1, True, 3, 5), rec("hiking", 2, True, 5, 5)]
    s = scoring.user_score(recs, 3)
    assert (s["ig_p"], s["ig_r"]) == (pytest.approx(1.0), pytest.approx(2 / 3))
    assert s["ig_f1"] == pytest.approx(0.8)
    assert s["is"] == pytest.approx(0.85)
    assert s["hm"] == pytest.approx(hm(0.8, 0.85))


def test_category_mixing_verified_and_unverified():
    recs = [rec("jazz piano", 7, True, 4, 5), rec("piano memes", 7, False, 1, 2), rec("sourdough", 9, False)]
    ratios = scoring.category_ratios(recs)
    assert ratios[7] == (pytest.approx(0.5), pytest.approx((0.8 + 0.5) / 2))  # S_c keeps the unverified one
    assert ratios[9] == (0.0, 0.0)
    s = scoring.user_score(recs, 4)
    assert s["ig_p"] == pytest.approx(0.5 / 2) and s["ig_r"] == pytest.approx(0.5 / 4)
    assert s["is"] == pytest.approx(0.65)  # category 9 has G_c = 0: not averaged
    pooled = scoring.user_score(recs, 4, "pooled")
    assert pooled["is"] == pytest.approx(5 / 7)  # paper eq. 7: Σcorrect / Σbacking


def test_empty_and_zero_oracle():
    assert scoring.user_score([], 5)["ig_f1"] == 0.0
    s = scoring.user_score([rec("a", 1, True, 1, 1)], 0)
    assert s["ig_r"] == 0.0 and s["ig_f1"] == 0.0 and s["is"] == 1.0


def test_union_oracle_and_supplied_oracle_skips():
    a = {("d", "u1"): [rec("x", 1, True), rec("y", 2, False)], ("d", "u2"): [rec("z", 0, True)]}
    b = {("d", "u1"): [rec("y", 2, True), rec("w", 3, True)], ("d", "u3"): [rec("v", 5, False)]}
    oracle = scoring.union_oracle(list(a.items()) + list(b.items()))
    assert oracle == {("d", "u1"): {1, 2, 3}, ("d", "u2"): {0}, ("d", "u3"): set()}  # category 0 counts
    scores, skipped = scoring.score_users(b, oracle, supplied=False)
    assert skipped == 0 and [s["ig_r"] for s in scores] == [pytest.approx(2 / 3), 0.0]
    scores, skipped = scoring.score_users(b, {("d", "u1"): {1}}, supplied=True)
    assert skipped == 1 and scores[0]["ig_r"] == pytest.approx(2.0)  # a supplied oracle can give IG_R > 1


def test_load_oracle_file(tmp_path):
    p = tmp_path / "o.json"
    p.write_text(json.dumps({"dataset": "synthetic", "oracle": {"1": [3, "4"]}}))
    assert scoring.load_oracle(p) == ("synthetic", {"1": {3, 4}})
    p.write_text("[1, 2]")
    with pytest.raises(Exception, match="not an oracle file"):
        scoring.load_oracle(p)


def test_summary_mean_median_and_ci():
    users = [{m: v for m in scoring.METRICS} for v in (0.0, 0.5, 0.6, 1.0)]
    out = scoring.summarize(users, n_boot=200, seed=1)
    assert out["ig_f1_mean"] == pytest.approx(0.525) and out["ig_f1_median"] == pytest.approx(0.55)
    assert out["ig_f1_mean_ci_low"] <= out["ig_f1_mean"] <= out["ig_f1_mean_ci_high"]
    assert out["ig_f1_median_ci_low"] <= out["ig_f1_median"] <= out["ig_f1_median_ci_high"]
    assert out["n_users"] == 4
    again = scoring.summarize(users, n_boot=200, seed=1)
    assert again == out


def test_failure_table_counts_unverified_only():
    recs = [rec("a", 1, True), {**rec("b", 2, False), "insufficient_imp_pos": True, "excessive_neg": True},
            {**rec("c", 3, False), "insufficient_imp_pos": True, "insufficient_exp_pos": True}]
    t = scoring.failure_table(recs)
    assert t["fail_insufficient_imp_pos"] == 1.0 and t["fail_insufficient_exp_pos"] == 0.5
    assert t["fail_excessive_neg"] == 0.5 and t["verified_rate"] == pytest.approx(1 / 3)
