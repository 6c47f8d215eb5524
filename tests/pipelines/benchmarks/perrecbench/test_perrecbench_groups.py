"""Group construction (paper §2.1) on small hand-made rating tables, one criterion at a time."""

from __future__ import annotations

import pandas as pd
import pytest

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.perrecbench.config import GroupConfig
from llmrec.pipelines.benchmarks.perrecbench.groups import (build_groups, greedy_spread, most_common, prepare, random_spread,
                                          spread_ok)
from llmrec.pipelines.common.seeding import stable_rng

DAY = 86400


def rows_for(user: str, fillers: list[float], query: str, rating: float, day: float, first_day: int = 1) -> list:
    """``fillers`` rated on days first_day, first_day+1, ...; then ``query`` on ``day``."""
    out = [(user, f"{user}-f{i}", r, (first_day + i) * DAY) for i, r in enumerate(fillers)]
    return out + [(user, query, rating, int(day * DAY))]


def frame(rows: list) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])


def item_table(query: str = "q", prefix: str = "") -> list:
    """Relative ratings (before-query means): A +2, B 0, C -1, D +0.5 within days 100-103;
    E inactive (3 earlier ratings + one at the query's own timestamp); F -2 on day 200."""
    p = prefix
    return (rows_for(f"{p}A", [3, 3, 3, 3], query, 5, 100) + rows_for(f"{p}B", [4, 4, 4, 4], query, 4, 101)
            + rows_for(f"{p}C", [2, 2, 2, 2], query, 1, 102) + rows_for(f"{p}D", [4, 4, 4, 4], query, 4.5, 103)
            + rows_for(f"{p}E", [1, 1, 1], query, 5, 100) + [(f"{p}E", f"{p}E-same", 1, 100 * DAY)]
            + rows_for(f"{p}F", [3, 3, 3, 3], query, 1, 200))


CFG = dict(min_history=3, min_gap=0.5, window_days=10, groups_per_level=5, heldout_per_level=0,
           sizes={"easy": 2, "medium": 3, "hard": 4})


def test_prepare_counts_only_strictly_earlier_ratings_and_means():
    p = prepare(frame(item_table()), GroupConfig(**CFG)).set_index(["user_id", "item_id"])
    assert p.loc[("A", "q"), "n_before"] == 4 and p.loc[("A", "q"), "avg_rating"] == 3.0
    assert p.loc[("A", "q"), "relative_rating"] == 2.0
    assert p.loc[("E", "q"), "n_before"] == 3  # the same-timestamp rating is not "before"
    ref = prepare(frame(item_table()), GroupConfig(**CFG, mean_mode="reference")).set_index(["user_id", "item_id"])
    assert ref.loc[("A", "q"), "avg_rating"] == pytest.approx(17 / 5)  # whole list, the query included
    assert ref.loc[("A", "q"), "relative_rating"] == pytest.approx(5 - 17 / 5)


def test_item_average_is_leave_one_out():
    p = prepare(frame(item_table()), GroupConfig(**CFG)).set_index(["user_id", "item_id"])
    others = [4, 1, 4.5, 5, 1]  # q ratings of B, C, D, E, F
    assert p.loc[("A", "q"), "item_avg_rating"] == pytest.approx(sum(others) / 5)


def test_repeated_pairs_keep_the_earliest_rating():
    rows = rows_for("A", [3, 3, 3, 3], "q", 5, 100) + [("A", "q", 1, 150 * DAY)]
    p = prepare(frame(rows), GroupConfig(**CFG))
    assert p[(p.user_id == "A") & (p.item_id == "q")]["rating"].tolist() == [5.0]


def test_missing_timestamps_are_refused():
    df = frame(item_table())
    df["timestamp"] = df["timestamp"].astype("Int64")
    df.loc[0, "timestamp"] = pd.NA
    with pytest.raises(DataError, match="timestamp"):
        prepare(df, GroupConfig(**CFG))


def test_gap_is_strict_and_greedy_finds_the_largest_set():
    assert spread_ok([0.0, 0.6], 0.5) and not spread_ok([0.0, 0.5], 0.5)
    values = pd.Series([2.0, 0.0, -1.0, 0.5]).to_numpy()  # A B C D
    assert sorted(greedy_spread(values, 0.5, 3)) == [0, 1, 2]  # C, B, A (B and D are exactly 0.5 apart)
    assert greedy_spread(values, 0.5, 4) is None
    for seed in range(10):
        picked = random_spread(values, 0.5, 3, stable_rng(seed))
        assert spread_ok([values[i] for i in picked], 0.5) and {0, 2} <= set(picked)


def test_groups_respect_window_activity_and_gap():
    groups = build_groups(frame(item_table()), GroupConfig(**CFG), ["easy", "medium"])
    by_level = {g["level"]: g for g in groups}
    med = {u["user_id"] for u in by_level["medium"]["users"]}
    assert med in ({"A", "B", "C"}, {"A", "C", "D"})  # E inactive, F outside the 10-day window
    assert {u["user_id"] for u in by_level["easy"]["users"]} <= med  # the same full group, a subset
    assert by_level["medium"]["window"][0] == 100 * DAY
    for g in groups:
        assert spread_ok([u["relative_rating"] for u in g["users"]], 0.5)
        assert all(u["history_len"] > 3 for u in g["users"])


def test_window_width_decides_which_groups_exist():
    with pytest.raises(DataError, match="no query item"):
        build_groups(frame(item_table()), GroupConfig(**{**CFG, "window_days": 0.5}), ["easy"])
    with pytest.raises(DataError, match="no query item"):  # four users need F, 100 days after A
        build_groups(frame(item_table()), GroupConfig(**CFG), ["hard"])
    hard = build_groups(frame(item_table()), GroupConfig(**{**CFG, "window_days": 365}), ["hard"])
    assert {u["user_id"] for u in hard[0]["users"]} == {"A", "B", "C", "F"} or \
        {u["user_id"] for u in hard[0]["users"]} == {"A", "D", "C", "F"}


def test_active_threshold_is_strict():
    rows = item_table()
    cfg = GroupConfig(**{**CFG, "min_history": 4})  # every user has exactly 4 earlier ratings: none active
    with pytest.raises(DataError):
        build_groups(frame(rows), cfg, ["easy"])


def many_items(n: int) -> pd.DataFrame:
    rows = []
    for k in range(n):
        rows += item_table(f"q{k}", prefix=f"i{k}-")
    return frame(rows)


def test_levels_share_items_heldout_is_disjoint_and_seeded():
    cfg = GroupConfig(**{**CFG, "groups_per_level": 4, "heldout_per_level": 3, "seed": 7})
    groups = build_groups(many_items(10), cfg, ["easy", "medium"])
    test = {lv: {g["item_id"] for g in groups if g["level"] == lv and g["split"] == "test"} for lv in ("easy", "medium")}
    held = {g["item_id"] for g in groups if g["split"] == "heldout"}
    assert len(test["easy"]) == 4 and test["easy"] == test["medium"]
    assert len(held) == 3 and not held & test["easy"]
    assert [len(g["users"]) for g in groups if g["level"] == "medium"] == [3] * 7
    assert build_groups(many_items(10), cfg, ["easy", "medium"]) == groups  # reproducible
    other = build_groups(many_items(10), GroupConfig(**{**CFG, "groups_per_level": 4, "heldout_per_level": 3,
                                                          "seed": 8}), ["easy", "medium"])
    assert other != groups


def test_levels_can_draw_their_own_items():
    cfg = GroupConfig(**{**CFG, "groups_per_level": 3, "heldout_per_level": 2, "same_items": False})
    groups = build_groups(many_items(8), cfg, ["easy", "medium"])
    tests = {g["item_id"] for g in groups if g["split"] == "test"}
    held = {g["item_id"] for g in groups if g["split"] == "heldout"}
    assert not tests & held
    assert all(len(g["users"]) == cfg.sizes[g["level"]] for g in groups)


def test_fewer_items_than_asked_is_a_warning_not_an_error(caplog):
    groups = build_groups(many_items(2), GroupConfig(**CFG), ["easy"])
    assert len([g for g in groups if g["split"] == "test"]) == 2
    assert "only 2 query items" in caplog.text


def test_most_common_prefers_the_first_seen_among_ties():
    assert most_common([5, 3, 3, 5, 1]) == 5.0
    assert most_common([1, 2, 2]) == 2.0
