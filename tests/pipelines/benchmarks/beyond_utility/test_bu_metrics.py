"""Hand-computed cases for every Beyond Utility metric, including each undefined (NaN) case.

The fixture (K=2, L=3): train_freq 1:10 2:5 3:3 4:1 5:0 6:2, n_users 20; T-freqs [1,2,3,5,10],
so Q(0.8)=6 and the PopREO edges are [0, 1.8, 2.6, 3.8, 6, 10].
u1 target 1, ranked [2,1,0] -> rank 2, hit 1, ndcg 1/log2(3);  u2 target 3 absent -> rank 3, hit 0;
u3 target 4, ranked [4,0,0] -> rank 1, hit 1, ndcg 1.  S = [2,1, 4,5, 4,0].
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmrec.pipelines.benchmarks.beyond_utility import metrics as M
from llmrec.pipelines.benchmarks.beyond_utility.metrics import Catalog, UserLine

K = 2


def _u(uid, target, cands, ranked, hist, base=None):
    return UserLine(uid, target, tuple(cands), tuple(ranked), hist, tuple(base if base is not None else cands))


@pytest.fixture
def cat():
    return Catalog({1: 10, 2: 5, 3: 3, 4: 1, 5: 0, 6: 2},
                   {1: ("A", "B"), 2: ("A",), 3: ("C",), 4: (), 6: ("B",)}, n_users=20)


@pytest.fixture
def users():
    return [_u("u1", 1, [1, 2, 3], [2, 1, 0], 5), _u("u2", 3, [3, 4, 5], [4, 5, 6], 1),
            _u("u3", 4, [4, 6, 2, 1], [4, 0, 0], 3)]


def test_hr_ndcg_rank_absent_is_len_candidates(users):
    assert list(M.ranks(users)) == [2, 3, 1]
    hit, ndcg = M.hits_and_ndcg(users, K)
    assert list(hit) == [1, 0, 1]
    assert ndcg == pytest.approx([1 / math.log2(3), 0, 1])


def test_target_beyond_k_is_no_hit_but_rank_counts():
    u = [_u("a", 7, [7, 8, 9], [8, 9, 7], 1)]
    hit, ndcg = M.hits_and_ndcg(u, 2)
    assert list(M.ranks(u)) == [3] and hit[0] == 0 and ndcg[0] == 0


def test_all_metrics_hand_computed(users, cat):
    m = M.compute(users, cat, K)
    assert m["hr"] == pytest.approx(2 / 3)
    assert m["ndcg"] == pytest.approx((1 / math.log2(3) + 1) / 3)
    assert m["arp"] == pytest.approx(17 / 6)
    assert m["aplt"] == pytest.approx(0.5)  # F in (0, 6): 5, 1, 1
    assert m["self_information"] == pytest.approx((2 + 1 + 2 * math.log2(20)) / 6)
    assert math.isnan(m["popreo"])  # bin (1.8, 2.6] holds no target
    assert m["serendipity"] == pytest.approx(1 / 3)  # u1: MostPop also hits; u3: 3 more popular -> MostPop misses
    assert m["gini"] == pytest.approx(1 / 6)  # counts [1,1,1,1,2]
    assert m["dpd"] == pytest.approx(abs(1 / math.log2(3) - 0.5))  # median 3: hot {u1}, cold {u2,u3}
    s, sq = 1 / math.log2(3) + 1, 1 / math.log2(3) ** 2 + 1
    assert m["jain"] == pytest.approx(s * s / (3 * sq))
    assert m["item_coverage"] == pytest.approx(5 / 6)  # {0,1,2,4,5} over {1..6}
    assert m["shannon"] == pytest.approx(-(0.5 * math.log(0.5)) / 3)  # u1: pA=1, pB=.5
    assert m["jaccard"] == pytest.approx(1 / 3)  # pairs (1,2)=0/1, (1,3)=0/2, (2,3)=1/1
    assert m["hallucination"] == pytest.approx(3 / 9)  # all L slots, not only top-K
    assert set(m) == set(M.METRIC_KEYS)


def test_popreo_defined_and_all_zero():
    cat = Catalog({1: 1, 2: 2, 3: 3, 4: 4, 5: 5}, {}, n_users=5)  # edges [0,1.8,2.6,3.4,4.2,5]
    hits = [True, True, False, True, False]
    users = [_u(f"u{t}", t, [t, 9], [t if h else 9, 9], 1) for t, h in zip(range(1, 6), hits)]
    hit, _ = M.hits_and_ndcg(users, 1)
    assert M.popreo(users, hit, cat) == pytest.approx(np.std([1, 1, 0, 1, 0]) / 0.6)
    assert math.isnan(M.popreo(users, np.zeros(5), cat))  # every bin HR is 0


def test_popreo_target_with_zero_freq_in_no_bin():
    cat = Catalog({1: 1, 2: 2, 3: 3, 4: 4, 5: 5}, {}, n_users=5)
    users = [_u(f"u{t}", t, [t], [t], 1) for t in range(1, 6)] + [_u("z", 42, [42], [0], 1)]
    hit = np.array([1, 1, 1, 1, 1, 0.0])
    assert M.popreo(users, hit, cat) == pytest.approx(0.0)  # the F=0 target is in none of the bins


def test_serendipity_ties_put_target_first():
    cat = Catalog({1: 5, 2: 5, 3: 5}, {}, n_users=3)
    u = [_u("a", 1, [2, 3, 1], [1, 2, 3], 1)]
    assert M.mostpop_hits(u, cat, 1)[0] == 1.0  # ties do not push the target down
    assert M.compute(u, cat, 1)["serendipity"] == 0.0


def test_serendipity_uses_base_candidates_not_presented():
    cat = Catalog({1: 1, 2: 9, 3: 9}, {}, n_users=3)
    u = [_u("a", 1, [1, 7], [1, 7], 1, base=[2, 3])]  # target added to B_u: {1,2,3}
    assert M.mostpop_hits(u, cat, 2)[0] == 0.0
    assert M.compute(u, cat, 2)["serendipity"] == 1.0


def test_gini_single_id_and_uniform():
    assert M.gini(np.array([5, 5, 5])) == pytest.approx(1.0)  # m=1: trapz of one point is 0
    assert M.gini(np.array([1, 2])) == pytest.approx(1 - 2 * 0.5 * (0.5 + 1) / 2)  # x=[0,.5], y=[.5,1]


def test_dpd_nan_when_a_group_is_empty(users, cat):
    c = Catalog(cat.train_freq, cat.categories, 20, history_len_median=5.0)  # nobody has history > 5
    assert math.isnan(M.compute(users, c, K)["dpd"])
    assert math.isnan(M.dpd(users, np.ones(3), 0.0))  # nobody has history <= 0


def test_jain_nan_when_no_hits():
    assert math.isnan(M.jain(np.zeros(4)))
    assert M.jain(np.array([1.0, 0.0])) == pytest.approx(0.5)


def test_jaccard_nan_without_overlapping_pairs_and_zero_is_an_id():
    disjoint = [_u("a", 1, [1, 2], [1, 2], 1), _u("b", 3, [3, 4], [3, 4], 1)]
    assert math.isnan(M.jaccard(disjoint, 2))
    assert math.isnan(M.jaccard(disjoint[:1], 2))  # one user: no pair
    zeros = [_u("a", 1, [1, 2], [0, 1], 1), _u("b", 2, [1, 2], [0, 2], 1)]
    assert M.jaccard(zeros, 2) == pytest.approx(1 / 2)  # {0,1} & {0,2} = {0}, B overlap {1,2}


def test_item_coverage_counts_zero_and_duplicates_once():
    us = [_u("a", 1, [1, 2], [0, 0], 1), _u("b", 3, [3], [1, 1], 1)]
    assert M.item_coverage(us, M.top_k(us, 2)) == pytest.approx(2 / 3)  # {0,1} over {1,2,3}


def test_shannon_uncategorised_slots_and_multilabel():
    cat = Catalog({1: 1, 2: 1}, {1: ("A", "B"), 2: ("A",)}, n_users=2)
    us = [_u("a", 1, [1, 2], [1, 2, 0], 1)]
    # K=3: A in 2 of 3 slots, B in 1 of 3 (slot 0 has none)
    expected = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert M.shannon(us, cat, 3) == pytest.approx(expected)
    assert M.shannon([_u("z", 5, [5], [0, 0], 1)], cat, 2) == 0.0


def test_empty_frequency_table_gives_nan_quantiles():
    cat = Catalog({}, {}, n_users=1)
    us = [_u("a", 1, [1, 2], [1, 2], 0)]
    m = M.compute(us, cat, 1)
    assert m["aplt"] == 0.0 and math.isnan(m["popreo"]) and m["arp"] == 0.0
