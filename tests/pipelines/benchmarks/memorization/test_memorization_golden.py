"""Golden numbers for the probe's matching and popularity buckets: ten fixed answers whose similarities, matches and
bucket coverages were computed by hand, following the reference code's rules (fuzzy ratio rounded to 2 decimals,
memorized when > 80; items ranked by unique users, buckets ending at ceil(0.2 n) and n), with an independent
longest-common-subsequence computation of the similarity rather than the library the package calls."""

from __future__ import annotations

import pandas as pd
import pytest

from llmrec.pipelines.benchmarks.memorization import BENCHMARK, catalogues, matching, metrics, samples
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig

# item id, title in the file, the model's answer, unique users who rated the item
GOLDEN = [
    ("1", "Toy Story (1995)", "1|Toy Story (1995)", 452),
    ("2", "GoldenEye (1995)", "Goldeneye (1995)", 131),
    ("3", "Four Rooms (1995)", "Four Rooms", 90),
    ("4", "Get Shorty (1995)", "4|Get Shorty (1996)", 209),
    ("5", "Copycat (1995)", "Unknown", 86),
    ("6", "Usual Suspects, The (1995)", "The Usual Suspects (1995)", 267),
    ("7", "Twelve Monkeys (1995)", "twelve monkeys (1995)", 392),
    ("8", "Babe (1995)", "", 219),
    ("9", "Dead Man Walking (1995)", "9|Dead Man Walking (1995)\n10|Richard III (1995)", 299),
    ("10", "Richard III (1995)", "Richard the Third", 89),
]
# by hand: 2 * LCS / (len(answer) + len(title)) * 100, rounded to 2 decimals
SIMILARITY = [100.0, 93.75, 74.07, 94.12, 9.52, 82.35, 90.48, 0.0, 67.65, 51.43]
FUZZY = [True, True, False, True, False, True, True, False, False, False]
EXACT = [True, False, False, False, False, False, False, False, False, False]
NORMALISED = [True, True, False, False, False, True, True, False, False, False]


def _rows(cut: str = "none") -> list[dict]:
    cat = catalogues.Catalogue("ml-100k", "MovieLens 100K", "|",
                               pd.DataFrame({"key": [g[0] for g in GOLDEN], "title": [g[1] for g in GOLDEN]}),
                               {g[0]: g[3] for g in GOLDEN}, "u.data")
    cfg = MemorizationConfig(answer_cut=cut)
    rows = samples.build(cfg, cat)
    for r, g in zip(rows, GOLDEN):
        r["output"] = g[2]
        r.update(BENCHMARK.score(cfg, r))
    return rows


def test_matching_reproduces_the_hand_computed_similarities_and_matches():
    rows = _rows()
    assert [r["similarity"] for r in rows] == SIMILARITY
    assert [r["correct"] for r in rows] == FUZZY
    assert [r["exact"] for r in rows] == EXACT
    assert [r["normalised"] for r in rows] == NORMALISED


def test_coverage_and_popularity_buckets_match_the_hand_computed_numbers():
    rows = _rows()
    # ranking by unique users: 1, 7, 9, 6, 8, 4, 2, 3, 10, 5; buckets end at ceil(0.2 * 10) = 2 and 10
    assert [r["pop_rank"] for r in rows] == [1, 7, 8, 6, 10, 4, 2, 5, 3, 9]
    assert [r["pop_bucket"] for r in rows] == ["top0-20"] + ["top20-100"] * 5 + ["top0-20"] + ["top20-100"] * 3
    m = metrics.aggregate_rows(rows)
    assert m["coverage"] == 0.5 and m["coverage_exact"] == 0.1 and m["coverage_normalised"] == 0.4
    assert m["n_answered"] == 10 and m["failed"] == 0 and m["coverage_ci_clusters"] == 10
    assert m["coverage_ci_low"] < 0.5 < m["coverage_ci_high"]
    assert m["pop/top0-20/coverage"] == 1.0 and m["pop/top0-20/n"] == 2
    assert m["pop/top20-100/coverage"] == 0.375 and m["pop/top20-100/n"] == 8
    assert m["mean_similarity"] == pytest.approx(sum(SIMILARITY) / 10)


def test_the_line_cut_option_reads_only_the_first_line():
    """answer_cut: line (a named difference from the reference) keeps '9|Dead Man Walking (1995)' as the title."""
    m = metrics.aggregate_rows(_rows("line"))
    assert m["coverage"] == 0.6 and m["coverage_exact"] == 0.2 and m["coverage_normalised"] == 0.5


def test_matching_edge_cases():
    assert matching.normalise("Usual Suspects, The (1995)") == matching.normalise("the usual suspects (1995)")
    assert matching.normalise("City of Lost Children, The (Cité des enfants perdus, La) (1995)").startswith("the city")
    assert matching.answer_text("1::Toy Story (1995)::Animation", "1", "::", "line") == "Toy Story (1995)"
    assert matching.match(None, "1", "|", "Toy Story (1995)")["correct"] is False
    assert not matching.match("", "1", "|", "Toy Story (1995)")["normalised"]


def test_user_lines_follow_the_references_inclusive_90_rule():
    """A user line is compared whole (the reference keeps the ID in both) and matches at similarity >= 90; by hand:
    the answer '1|2|M|x|1' is a 9-character prefix of the 11-character line '1|2|M|x|123', 2 * 9 / 20 = 90.0."""
    m = matching.match("1|2|M|x|1", "1", "|", "1|2|M|x|123", probe="user")
    assert m["similarity"] == 90.0 and m["correct"] and not m["exact"]
    assert not matching.match("1|2|M|x|1", "1", "|", "1|2|M|x|123", threshold=90.0, probe="user")["correct"]
    assert matching.match(" 7::F::1::10::48067\n", "7", "::", "7::F::1::10::48067", probe="user")["exact"]


def test_interaction_rows_follow_the_references_above_90_rule():
    """By hand: '196\\t241' against '196\\t242' shares 6 of 7 + 7 characters, 2 * 6 / 14 = 85.71: not a match."""
    m = matching.match("196\t241", "196", "\t", "196\t242", probe="interaction")
    assert m["similarity"] == 85.71 and not m["correct"]
    assert matching.match("196\t242\n", "196", "\t", "196\t242", probe="interaction")["exact"]


def test_attribute_answers_by_hand():
    """Year: the first four-digit number of the answer; genres: the set of names (Jaccard x 100 as similarity):
    {comedy, romance} against {comedy, drama} shares 1 of 3 names, 33.33."""
    year = matching.match_attribute("3|Four Rooms|1995", "3|Four Rooms", "|", "1995", "year")
    assert year["answer"] == "1995" and year["correct"] and year["exact"]
    assert matching.match_attribute("It came out in 1995.", "3|Four Rooms", "|", "1995", "year")["correct"]
    assert not matching.match_attribute("19955", "3|Four Rooms", "|", "1995", "year")["correct"]
    g = matching.match_attribute("3::Grumpier Old Men (1995)::Comedy|Drama", "3::Grumpier Old Men (1995)", "::",
                                 "Comedy|Romance", "genres")
    assert g["similarity"] == 33.33 and not g["correct"]
    same = matching.match_attribute("romance, comedy", "3::Grumpier Old Men (1995)", "::", "Comedy|Romance", "genres")
    assert same["correct"] and same["normalised"] and not same["exact"] and same["similarity"] == 100.0
