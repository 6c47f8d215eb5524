"""Each metric on hand-computed cases, full and sampled modes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from llmrec.models.base import ModelConfig, Recommender
from llmrec.models.data import EvalSet, RecData
from llmrec.models.evaluation import EvalConfig, evaluate, metrics_from_hits


def test_single_positive_at_rank_3():
    m = metrics_from_hits(np.array([[0, 0, 1, 0, 0]], bool), np.array([1]), [2, 5])
    assert m["hr@2"][0] == 0 and m["hr@5"][0] == 1
    assert m["ndcg@5"][0] == pytest.approx(1 / math.log2(4))
    assert m["mrr@5"][0] == pytest.approx(1 / 3) and m["mrr@2"][0] == 0
    assert m["recall@5"][0] == 1 and m["precision@5"][0] == pytest.approx(0.2)


def test_two_positives_ndcg_uses_ideal_of_min_npos_k():
    # hits at ranks 1 and 3, three positives in all
    m = metrics_from_hits(np.array([[1, 0, 1, 0]], bool), np.array([3]), [2, 4])
    dcg4 = 1 + 1 / math.log2(4)
    idcg4 = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg@4"][0] == pytest.approx(dcg4 / idcg4)
    assert m["ndcg@2"][0] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert m["recall@4"][0] == pytest.approx(2 / 3) and m["precision@2"][0] == pytest.approx(0.5)
    assert m["mrr@4"][0] == 1.0


def test_no_hit_is_zero_everywhere():
    m = metrics_from_hits(np.zeros((1, 3), bool), np.array([1]), [3])
    assert all(v[0] == 0 for v in m.values())


class FixedScores(Recommender):
    """Scores from a fixed matrix, for evaluator tests."""

    config_cls = ModelConfig

    def __init__(self, data, scores):
        super().__init__(ModelConfig(name="fixed"), data)
        self.scores = torch.tensor(scores, dtype=torch.float32)

    def full_scores(self, users, seq, seq_len):
        return self.scores[users]


def fixed_data(negatives=None):
    # 2 users, items 1..5 (0 = pad); user 0 trained on item 1, positive item 3; user 1 positive items 2 and 5.
    ev = EvalSet(np.array([0, 1]), [np.array([3]), np.array([2, 5])], [np.array([1]), np.array([4])], negatives)
    return RecData(
        np.array(["a", "b"], dtype=object),
        np.array(["<pad>", "i1", "i2", "i3", "i4", "i5"], dtype=object),
        np.array([0, 1]),
        np.array([1, 4]),
        ev,
        ev,
        np.array([0, 1]),
        np.array([1, 4]),
    )


SCORES = [[0, 9, 1, 5, 7, 2], [0, 1, 3, 2, 9, 8]]


def test_full_ranking_excludes_history_and_keeps_per_user_rows():
    data = fixed_data()
    res = evaluate(FixedScores(data, SCORES), data, "valid", EvalConfig(topk=[1, 2]), keep_topk=2)
    # user 0: item1 (history) masked -> ranking 4,3,5,2 -> positive 3 at rank 2
    # user 1: item4 (history) masked -> ranking 5,2,3,1 -> positives at ranks 1,2
    assert res.per_user["user_id"].tolist() == ["a", "b"]
    assert res.per_user["hr@1"].tolist() == [0.0, 1.0]
    assert res.per_user["ndcg@2"].tolist() == pytest.approx([1 / math.log2(3), 1.0])
    assert res.per_user["rank"].tolist() == [2, 1]
    assert res.metrics["recall@1"] == pytest.approx((0 + 0.5) / 2)
    assert res.topk_items.tolist() == [[4, 3], [5, 2]]


def test_full_ranking_without_history_exclusion():
    data = fixed_data()
    res = evaluate(FixedScores(data, SCORES), data, "valid", EvalConfig(topk=[1], exclude_history=False))
    assert res.per_user["rank"].tolist() == [3, 2]


def test_sampled_mode_ranks_only_candidates():
    data = fixed_data(negatives=np.array([[2, 5], [1, 3]]))
    res = evaluate(FixedScores(data, SCORES), data, "valid", EvalConfig(topk=[1, 3]))
    # user 0 candidates {3, 2, 5}: 3 scores highest; user 1 {2, 5, 1, 3}: 5 then 2 -> both positives on top
    assert res.per_user["hr@1"].tolist() == [1.0, 1.0]
    assert res.per_user["ndcg@3"].tolist() == pytest.approx([1.0, 1.0])
    assert res.metrics["precision@3"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def constant_data(n_users: int = 400, n_items: int = 51, negatives=None):
    """Every user: no history, one positive (item 1 + user % 50); a model scoring all items equally."""
    users = np.arange(n_users)
    ev = EvalSet(users, [np.array([1 + u % (n_items - 1)]) for u in users], [np.zeros(0, np.int64)] * n_users,
                 negatives)
    return RecData(np.array([f"u{u}" for u in users], dtype=object),
                   np.array(["<pad>"] + [f"i{i}" for i in range(1, n_items)], dtype=object),
                   np.zeros(0, np.int64), np.zeros(0, np.int64), ev, ev)


@pytest.mark.parametrize("sampled", [False, True])
def test_ties_never_favour_a_model(sampled):
    """All scores equal: rank is uniform over the candidates (mean ≈ (n+1)/2), not 1 (issue 16)."""
    n_users, n_items = 400, 51
    negatives = None
    if sampled:  # 19 negatives: every other item but the positive, first 19
        negatives = np.array([[i for i in range(1, n_items) if i != 1 + u % (n_items - 1)][:19]
                              for u in range(n_users)])
    data = constant_data(n_users, n_items, negatives)
    model = FixedScores(data, np.zeros((n_users, n_items)))
    res = evaluate(model, data, "test", EvalConfig(topk=[1, 10]))
    n_cand = 20 if sampled else n_items - 1
    rank = res.per_user["rank"].to_numpy()
    assert rank.min() >= 1 and rank.max() <= n_cand
    assert abs(rank.mean() - (n_cand + 1) / 2) < 0.15 * n_cand
    assert res.metrics["hr@1"] == pytest.approx(np.mean(rank == 1))  # top-K and rank follow one order
    assert res.metrics["hr@10"] == pytest.approx(np.mean(rank <= 10))
    assert res.metrics["mrr"] == pytest.approx(np.mean(1 / rank))
    again = evaluate(model, data, "test", EvalConfig(topk=[1, 10]))
    assert (again.per_user["rank"].to_numpy() == rank).all()  # seeded: reproducible


def test_exclude_history_defaults_per_family():
    from llmrec.models.evaluation import history_masked

    class Seq(FixedScores):
        uses_sequence = True

    assert history_masked(EvalConfig(), FixedScores) is True and history_masked(EvalConfig(), Seq) is False
    assert history_masked(EvalConfig(exclude_history=True), Seq) is True
