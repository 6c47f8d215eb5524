"""Dedup policies, the implicit threshold and k-core on hand-made frames."""

from __future__ import annotations

import pandas as pd
import pytest

from llmrec.errors import DataError
from llmrec.interactions import FilterConfig, apply_filters, dedup, k_core, threshold
from llmrec.interactions.schema import canonical_interactions


def frame(rows):
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    df.index = range(1, len(df) + 1)
    return canonical_interactions(df, "test")


DUPS = [("u", "a", 1, 10), ("u", "b", 2, 11), ("u", "a", 5, 30), ("u", "a", 3, 20)]


@pytest.mark.parametrize("policy, rating, ts", [("first", 1.0, 10), ("last", 5.0, 30), ("mean", 3.0, 30)])
def test_dedup_policies_pick_by_time(policy, rating, ts):
    out = dedup(frame(DUPS), policy)
    row = out.loc[out["item_id"] == "a"]
    assert len(row) == 1 and row["rating"].item() == rating and row["timestamp"].item() == ts
    assert len(out) == 2


def test_dedup_keep_and_error():
    assert len(dedup(frame(DUPS), "keep")) == 4
    with pytest.raises(DataError, match="3 rows repeat a \\(user, item\\) pair, e.g. user 'u' item 'a'"):
        dedup(frame(DUPS), "error")


def test_threshold_and_binarize():
    out = threshold(frame([("u", "a", 2, 1), ("u", "b", 4, 2), ("v", "a", 5, 3)]), 4, binarize=True)
    assert out["item_id"].tolist() == ["b", "a"] and out["rating"].tolist() == [1.0, 1.0]


def test_k_core_is_iterative():
    # v has 2 items; dropping item c (1 user) leaves u with 2, then every count >= 2.
    rows = [("u", "a", 1, 1), ("u", "b", 1, 2), ("u", "c", 1, 3), ("v", "a", 1, 4), ("v", "b", 1, 5), ("w", "a", 1, 6)]
    out = k_core(frame(rows), 2, 2)
    assert sorted(zip(out["user_id"], out["item_id"])) == [("u", "a"), ("u", "b"), ("v", "a"), ("v", "b")]
    assert (out.groupby("user_id").size() >= 2).all() and (out.groupby("item_id").size() >= 2).all()
    with pytest.raises(DataError, match="removed every interaction"):
        k_core(frame(rows), 5, 5)


def test_apply_filters_order():
    out = apply_filters(frame(DUPS + [("v", "b", 4, 40)]), FilterConfig(dedup="last", min_rating=4, item_core=1))
    assert sorted(zip(out["user_id"], out["item_id"])) == [("u", "a"), ("v", "b")]
