"""Split protocols: sizes, ordering, no leakage, determinism; sampled negatives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmrec.errors import DataError
from llmrec.interactions import SplitConfig, sample_negatives, split_interactions
from llmrec.interactions.schema import canonical_interactions
from llmrec.interactions.splits import Split, split_counts


def synthetic(n_users=20, per_user=12, n_items=50, seed=0, with_time=True):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        for t, i in enumerate(rng.choice(n_items, size=per_user - (u % 3), replace=False)):
            rows.append((f"u{u}", f"i{i}", 1.0, 1000 + t * 7 + u if with_time else None))
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    df.index = range(1, len(df) + 1)
    return canonical_interactions(df, "synthetic")


def pairs(df):
    return set(zip(df["user_id"], df["item_id"]))


def assert_partition(df, split):
    assert len(split.train) + len(split.valid) + len(split.test) == len(df)
    assert not pairs(split.test) & pairs(split.train)
    assert not pairs(split.valid) & pairs(split.train)
    assert not pairs(split.test) & pairs(split.valid)


def test_loo_takes_the_last_two_by_time():
    df = synthetic()
    split = split_interactions(df, SplitConfig(protocol="loo"))
    assert_partition(df, split)
    assert split.test["user_id"].is_unique and len(split.test) == 20 and len(split.valid) == 20
    for user, group in df.groupby("user_id"):
        last = group.sort_values("timestamp")["item_id"].tolist()
        assert split.test.loc[split.test["user_id"] == user, "item_id"].item() == last[-1]
        assert split.valid.loc[split.valid["user_id"] == user, "item_id"].item() == last[-2]
        assert split.train.loc[split.train["user_id"] == user, "timestamp"].max() < group["timestamp"].max()
    assert split.protocol["protocol"] == "loo" and split.protocol["n_test"] == 20


def test_loo_rejects_single_interaction_users_and_missing_time():
    df = synthetic()
    one = pd.concat(
        [df, canonical_interactions(pd.DataFrame({"user_id": ["lonely"], "item_id": ["i1"], "timestamp": [5]}), "x")]
    )
    with pytest.raises(DataError, match=r"1 user\(s\) have 1 \(first: \['lonely'\]\).*user_core"):
        split_interactions(one, SplitConfig(protocol="loo"))
    with pytest.raises(DataError, match="needs timestamps"):
        split_interactions(synthetic(with_time=False), SplitConfig(protocol="loo"))


def test_loo_user_with_two_interactions_gets_train_and_test_only():
    df = canonical_interactions(pd.DataFrame({"user_id": ["a", "a"], "item_id": ["x", "y"], "timestamp": [2, 1]}), "t")
    split = split_interactions(df, SplitConfig(protocol="loo"))
    assert split.test["item_id"].tolist() == ["x"] and split.train["item_id"].tolist() == ["y"] and split.valid.empty


def test_split_counts_follow_recbole_rounding():
    counts = split_counts(np.array([10, 12, 5, 2, 1]), (0.8, 0.1, 0.1))
    assert counts.tolist() == [[8, 1, 1], [10, 1, 1], [3, 1, 1], [1, 0, 1], [1, 0, 0]]


def test_random_split_per_user_ratios_seeded_no_leakage():
    df = synthetic()
    cfg = SplitConfig(protocol="random", seed=7)
    a, b = split_interactions(df, cfg), split_interactions(df, cfg)
    assert_partition(df, a)
    assert pairs(a.test) == pairs(b.test)
    assert pairs(a.test) != pairs(split_interactions(df, SplitConfig(protocol="random", seed=8)).test)
    sizes = df.groupby("user_id").size()
    expected = split_counts(sizes.to_numpy(), (0.8, 0.1, 0.1))
    got = a.train.groupby("user_id").size().reindex(sizes.index).to_numpy()
    assert got.tolist() == expected[:, 0].tolist()


def test_temporal_split_is_a_global_time_cut():
    df = synthetic()
    split = split_interactions(df, SplitConfig(protocol="temporal"))
    assert split.train["timestamp"].max() <= split.valid["timestamp"].min()
    assert split.valid["timestamp"].max() <= split.test["timestamp"].min()
    assert set(split.test["item_id"]) <= set(split.train["item_id"])
    assert not pairs(split.test) & pairs(split.train)


def test_sampled_negatives_are_unseen_distinct_and_seeded():
    df = synthetic()
    split = split_interactions(df, SplitConfig(protocol="loo"))
    neg = sample_negatives(split, "test", 10, seed=3)
    seen = df.groupby("user_id")["item_id"].agg(set)
    for user, items in zip(neg["user_id"], neg["negatives"]):
        assert len(items) == 10 == len(set(items)) and not set(items) & seen[user]
    again = sample_negatives(split, "test", 10, seed=3)
    assert neg["negatives"].tolist() == again["negatives"].tolist()
    with pytest.raises(DataError, match="cannot sample 100 negatives"):
        sample_negatives(split, "test", 100, seed=3)


def test_valid_and_test_draw_their_own_negatives():
    split = split_interactions(synthetic(), SplitConfig(protocol="loo"))
    valid, test = sample_negatives(split, "valid", 10, seed=3), sample_negatives(split, "test", 10, seed=3)
    assert valid["user_id"].tolist() == test["user_id"].tolist()
    assert valid["negatives"].tolist() != test["negatives"].tolist()


def test_popularity_sampled_negatives_favour_popular_items():
    import collections

    split = split_interactions(synthetic(), SplitConfig(protocol="loo"))
    counts = split.train["item_id"].value_counts()
    drawn = collections.Counter(i for row in sample_negatives(split, "test", 5, seed=3, sampler="popularity")
                                ["negatives"] for i in row)
    uniform = collections.Counter(i for row in sample_negatives(split, "test", 5, seed=3)["negatives"] for i in row)
    top = set(counts.index[: max(1, len(counts) // 5)])
    share = lambda c: sum(v for k, v in c.items() if k in top) / sum(c.values())  # noqa: E731
    assert share(drawn) > share(uniform)
    with pytest.raises(ValueError, match="sampler"):
        sample_negatives(split, "test", 5, seed=3, sampler="zipf")


def test_split_from_frames_records_given_protocol():
    df = synthetic()
    s = Split.from_frames(df.iloc[:10], df.iloc[10:12], df.iloc[12:14])
    assert s.protocol == {"protocol": "given", "n_train": 10, "n_valid": 2, "n_test": 2}
