"""Ranking given candidates with a trained recommender, and the round-robin re-ranking pool."""

from __future__ import annotations

import pandas as pd
import pytest

from llmrec.errors import DataError
from llmrec.interactions.splits import leave_one_out, Split
from llmrec.models.base import build_model, model_config
from llmrec.models.candidates import rank_candidates, round_robin_pool
from llmrec.models.data import encode


def _data():
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u1", "c", 3), ("u1", "d", 4),
            ("u2", "a", 1), ("u2", "b", 2), ("u2", "e", 3), ("u3", "a", 1), ("u3", "f", 2), ("u3", "g", 3)]
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).assign(rating=1.0)
    df["timestamp"] = df["timestamp"].astype("Int64")
    return encode(Split.from_frames(*leave_one_out(df)))


def test_mostpop_ranks_given_candidates_unknown_last_ties_stable():
    data = _data()  # train: u1 a b, u2 a, u3 a -> a:3, b:1
    model = build_model(model_config({"name": "mostpop"}), data)
    model.fit(data)
    ranked = rank_candidates(model, data, ["u1", "u2"], [["zz", "b", "a"], ["b", "c", "a"]])
    assert ranked[0] == ["a", "b", "zz"]  # zz is unknown to the model: last
    assert ranked[1][0] == "a" and ranked[1][1] == "b"  # b (1) above c (0)


def test_ranked_lists_say_when_a_tie_decided_the_top():
    from llmrec.models.candidates import tied_within

    data = _data()  # train counts: a 3, b 1, every other item 0
    model = build_model(model_config({"name": "mostpop"}), data)
    model.fit(data)
    ranked = rank_candidates(model, data, ["u1", "u2"], [["c", "e", "a"], ["b", "f", "a"]])
    assert ranked[0] == ["a", "c", "e"] and ranked[0].scores[1] == ranked[0].scores[2]  # c and e: given order
    assert tied_within(ranked[0], 2) is True  # which of c and e makes a top 2 is the candidates' order
    assert tied_within(ranked[0], 1) is False  # a alone is first on its own count
    assert tied_within(ranked[1], 3) is False  # a 3, b 1, f 0: no tie
    assert tied_within(["a", "b"], 2) is None  # a ranker that gives no scores: unknown


def test_unknown_user_fails_naming_it():
    data = _data()
    model = build_model(model_config({"name": "mostpop"}), data)
    model.fit(data)
    with pytest.raises(DataError, match="nobody"):
        rank_candidates(model, data, ["nobody"], [["a"]])


def test_round_robin_pool_dedups_in_turns():
    assert round_robin_pool([["a", "b", "c"], ["b", "d"], ["a", "e", "f"]], 4) == ["a", "b", "d", "e"]  # rank 1: a b (a dup); rank 2: (b dup) d e
    assert round_robin_pool([["a"], ["a"]], 5) == ["a"]
