"""The confidence sequence behind the regression gate's early stop: valid when one looks after every cluster
(simulated A/B evaluations, ≥ 500 replications per case) and quick to decide a clear difference."""

from __future__ import annotations

import numpy as np
import pytest

from llmrec.pipelines.common import sequential as sq
from perf.gate_simulation import cases, main

ALPHA, MARGIN = 0.05, 0.05


def test_the_simulation_holds_alpha_and_stops_early_on_a_clear_difference(capsys):
    rows = {r["case"]: r for r in main(["--reps", "500", "--users", "2000", "--per-user", "4"])}
    assert "share used" in capsys.readouterr().out
    for name in ("equal", "equal, strong within-user correlation"):
        assert rows[name]["worse"] <= ALPHA and rows[name]["not_worse"] >= 0.9
    # at the boundary itself either decision is wrong: each side of the sequence errs at most alpha / 2 (+ noise)
    for name in ("equal, no margin (the boundary)", "worse by the margin (the boundary)"):
        assert rows[name]["worse"] <= ALPHA / 2 + 0.015 and rows[name]["not_worse"] <= ALPHA / 2 + 0.015
        assert rows[name]["worse"] + rows[name]["not_worse"] <= ALPHA
    for name in ("worse by 2 × margin", "worse by 2 × margin, strong within-user correlation"):
        assert rows[name]["worse"] >= 0.95 and rows[name]["not_worse"] == 0
        assert rows[name]["share_used"] <= 0.40
    assert rows["better by 2 × margin, strong within-user correlation"]["share_used"] <= 0.40


def test_a_naive_sequence_would_fail_the_same_check():
    """The check has teeth: the fixed-sample 95 % normal interval, looked at after every cluster, declares a
    difference between equal subjects far more often than alpha."""
    rng = np.random.default_rng(1)
    case = cases(MARGIN)[2]  # equal, no margin
    from perf.gate_simulation import differences

    d = differences(case, 500, 2000, 4, rng)
    t = np.arange(1, d.shape[1] + 1)
    mean = np.cumsum(d, axis=1) / t
    sd = np.sqrt(np.maximum(np.cumsum(d ** 2, axis=1) / t - mean ** 2, 1e-12))
    half = 1.96 * sd / np.sqrt(t)
    wrong = ((mean - half > 0) | (mean + half < 0))[:, 10:].any(axis=1).mean()
    assert wrong > 3 * ALPHA


def test_bounds_shrink_cover_the_mean_and_decide_against_the_margin():
    rng = np.random.default_rng(0)
    x = np.clip(rng.normal(0.2, 0.3, 3000), -1, 1)
    early, late = sq.confidence_sequence(x[:100], 3000, margin=0.1), sq.confidence_sequence(x, 3000, margin=0.1)
    assert early.lower < 0.2 < early.upper and late.lower < x.mean() < late.upper
    assert late.upper - late.lower < early.upper - early.lower
    assert late.decision == sq.NOT_WORSE and late.lower > -0.1
    assert sq.confidence_sequence(-x, 3000, margin=0.1).decision == sq.WORSE
    assert sq.confidence_sequence([], 10).decision == sq.UNDECIDED
    assert sq.confidence_sequence(x[:5], 3000, margin=0.1).decision == sq.UNDECIDED  # five clusters prove nothing
    state = sq.confidence_sequence(x, 3000, margin=0.1).as_dict()
    assert state["share_used"] == 1.0 and state["clusters_used"] == 3000


def test_cluster_differences_average_within_the_cluster_and_follow_the_direction():
    labels, d = sq.cluster_differences([1, 1, 0, 1], [0, 1, 0, 0], ["u1", "u1", "u2", "u2"])
    assert list(labels) == ["u1", "u2"] and list(d) == [0.5, 0.5]
    _, d = sq.cluster_differences([1, 1, 0, 1], [0, 1, 0, 0], ["u1", "u1", "u2", "u2"], lower_is_better=True)
    assert list(d) == [-0.5, -0.5]


@pytest.mark.parametrize("kw, msg", [({"alpha": 1.5}, "alpha"), ({"margin": -0.1}, "margin"),
                                      ({"values": [2.0]}, "outside"), ({"n_total": 0}, "population")])
def test_bad_inputs_are_named(kw, msg):
    args = {"values": [0.1], "n_total": 10, **kw}
    with pytest.raises(ValueError, match=msg):
        sq.confidence_sequence(**args)
