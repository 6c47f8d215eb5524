"""BM25 top-k retrieval as the reference runs it (rank_bm25, whitespace docs, space-split query)."""

from __future__ import annotations

from rank_bm25 import BM25Okapi

from llmrec.pipelines.benchmarks.perrecbench.prompts import encode_item, encode_query
from llmrec.pipelines.benchmarks.perrecbench.retrieval import top_k


def docs(titles: list[str]) -> list[str]:
    return [encode_item({"title": t, "rating": 4.0}) for t in titles]


def test_best_matches_come_first():
    history = docs(["Cheese Grater Deluxe", "Empire Records", "Dog Leash", "Back to the Future", "Empire Strikes Twice"])
    query = encode_query({"title": "The Empire Strikes Back"})
    # space-split query tokens: "Title\nThe", "Empire", "Strikes", "Back\n<|The": only the inner words can match
    assert top_k(history, query, 2) == [4, 1]


def test_k_larger_than_history_returns_everything_and_empty_history_nothing():
    history = docs(["A b c", "d e f"])
    assert sorted(top_k(history, encode_query({"title": "x y z"}), 8)) == [0, 1]
    assert top_k([], encode_query({"title": "x"}), 4) == []


def test_ties_put_the_later_history_item_first():
    history = docs(["Red Lamp", "Blue Chair", "Green Table"])  # nothing matches: equal scores
    assert top_k(history, encode_query({"title": "a zebra b"}), 3) == [2, 1, 0]


def test_same_choice_as_rank_bm25_get_top_n():
    titles = ["Stainless Coffee Percolator 12 cup", "Coffee Grinder Burr", "Cotton Napkins Set", "Linen Napkins",
              "Coffee Maker Single Serve Brewer", "Rug Runner", "Coffee Maker Single Serve Brewer"]
    history = docs(titles)
    query = encode_query({"title": "Keurig Coffee Maker Single Serve K-Cup Brewer Red", "author": "Keurig Inc"})
    bm25 = BM25Okapi([d.split() for d in history])
    expected = bm25.get_top_n(query.split(" "), history, 4)
    assert [history[i] for i in top_k(history, query, 4)] == expected
    assert len(set(top_k(history, query, 4)) & {4, 6}) == 2  # duplicates in the history both survive
