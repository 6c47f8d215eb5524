"""Point → ordering, pairwise heapsort (scripted comparator, memo replay), listwise."""

from __future__ import annotations

import itertools
import math

import pytest

from llmrec.pipelines.benchmarks.perrecbench.parsing import parse_list, parse_pair, prefers_first
from llmrec.pipelines.benchmarks.perrecbench.ranking import heapsort_ordering, next_comparison, pair_key, point_ordering


class Scripted:
    """greater(a, b) from hidden scores; records every call."""

    def __init__(self, scores):
        self.scores, self.calls = scores, []

    def __call__(self, a, b):
        self.calls.append((a, b))
        return self.scores[a] > self.scores[b]


def test_heapsort_sorts_with_a_consistent_comparator_and_traces_the_reference_order():
    cmp = Scripted([2, 1, 3])  # user 3 best, then user 1, then user 2
    assert heapsort_ordering(3, cmp) == [3, 1, 2]
    assert cmp.calls == [(1, 0), (2, 0), (1, 0)]  # build: left, right of the root; extract: re-sift


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_heapsort_is_correct_for_every_order_and_n_log_n(n):
    bound = 2 * n * math.ceil(math.log2(n)) + n
    for perm in itertools.permutations(range(n)):
        cmp = Scripted(list(perm))
        expected = [u + 1 for u in sorted(range(n), key=lambda u: -perm[u])]
        assert heapsort_ordering(n, cmp) == expected
        assert len(cmp.calls) <= bound


@pytest.mark.parametrize("n,expected", [(2, [1, 2]), (3, [1, 3, 2]), (4, [1, 4, 3, 2])])
def test_never_consistent_comparator_gives_the_reference_fallback_orders(n, expected):
    # a position-biased model (always "[User A]") never wins both orders: every comparison is False
    assert heapsort_ordering(n, lambda a, b: False) == expected


def run_memo(n, reply):
    """Drive next_comparison like the pair LoopStage: one comparison (both orders) per round."""
    answers, rounds = {}, 0
    while True:
        nxt = next_comparison(n, answers)
        if isinstance(nxt, list):
            return nxt, rounds, answers
        a, b = nxt
        rounds += 1
        answers[pair_key(a, b)] = parse_pair(reply(a, b))
        answers[pair_key(b, a)] = parse_pair(reply(b, a))


def test_memo_replay_asks_each_pair_once_and_matches_direct_heapsort():
    scores = [0.3, 2.0, -1.0, 1.1]
    truth = heapsort_ordering(4, lambda a, b: scores[a] > scores[b])
    ordering, rounds, answers = run_memo(4, lambda a, b: "[User A]" if scores[a] > scores[b] else "[User B]")
    assert ordering == truth == [2, 4, 1, 3]
    assert rounds == len(answers) // 2 <= 6  # each unordered pair at most once


def test_memo_replay_with_a_position_biased_model():
    ordering, rounds, _ = run_memo(3, lambda a, b: "[User A]")
    assert ordering == [1, 3, 2] and rounds == 3  # pairs (1,0), (2,0), (1,2)


def test_pair_agreement_needs_both_orders_in_the_same_form():
    assert prefers_first("[user a]", "[user b]") and prefers_first("user a", "user b")
    assert not prefers_first("[user a]", "user b")  # mixed forms
    assert not prefers_first("[user a]", "[user a]")  # position bias
    assert not prefers_first(None, "[user b]")  # unparsable


def test_point_ordering_uses_relative_predictions_and_the_tie_rule():
    assert point_ordering([4, 4, 2], [3.5, 4.2, 1.0]) == [3, 1, 2]  # scores 0.5, -0.2, 1.0
    assert point_ordering([4, 4], [3.5, 3.5]) == [2, 1]  # tie: the higher index first


def test_listwise_answer_is_the_ordering():
    assert parse_list('{"predicted_ranking": [2, 3, 1]}', 3) == [2, 3, 1]
