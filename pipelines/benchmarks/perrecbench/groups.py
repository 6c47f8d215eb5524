"""User-group construction (PerRecBench paper §2.1) from any timestamped rating table.

A group is a query item q and users who all rated q within one window [t0, t0 + Δt]
(temporal co-purchase: the same item quality), each with MORE than γ ratings strictly
before their rating of q (active users), whose relative ratings (rating − the user's
mean rating) differ pairwise by MORE than λ. Levels differ only in group size.

As in the reference, by default one pool of query items serves every level: each item
gets one "full" group of the largest size, and each level takes a random subset of its
users (the same items at every level, different users). Held-out groups (the few-shot
pool) use query items disjoint from every test group's.

Input: a pandas frame with ``user_id, item_id, rating, timestamp`` (the interaction data
layer's canonical schema). Output: JSON-able group dicts; see ``build_groups``.
"""

from __future__ import annotations

import logging
import random
from collections import Counter

import numpy as np
import pandas as pd

from llmrec.errors import DataError
from llmrec.pipelines.common.seeding import stable_rng
from llmrec.pipelines.benchmarks.perrecbench.config import GroupConfig

log = logging.getLogger(__name__)

COLUMNS = ("user_id", "item_id", "rating", "timestamp")
_TRIES = 20  # random draws of a valid user subset before falling back to the greedy one


def seconds_per_unit(timestamps: pd.Series, unit: str) -> float:
    if unit == "s":
        return 1.0
    if unit == "ms":
        return 1e-3
    return 1e-3 if len(timestamps) and float(timestamps.max()) > 1e11 else 1.0


def prepare(interactions: pd.DataFrame, cfg: GroupConfig) -> pd.DataFrame:
    """Sorted, de-duplicated ratings with per-row ``n_before``, ``avg_rating``, ``relative_rating``
    and ``item_avg_rating`` (leave-one-out mean of the item's other ratings)."""
    missing = [c for c in COLUMNS if c not in interactions.columns]
    if missing:
        raise DataError(f"PerRecBench needs columns {list(COLUMNS)}; missing {missing}")
    df = interactions[list(COLUMNS)].copy()
    if df["timestamp"].isna().any():
        raise DataError("PerRecBench needs a timestamp on every rating (temporal windows, history before the "
                        f"query); {int(df['timestamp'].isna().sum())} rating(s) have none")
    df["user_id"], df["item_id"] = df["user_id"].astype(str), df["item_id"].astype(str)
    df["rating"] = df["rating"].astype("float64")
    df["timestamp"] = df["timestamp"].astype("int64")
    df = df.sort_values(["user_id", "timestamp"], kind="stable")
    n_dup = int(df.duplicated(["user_id", "item_id"]).sum())
    if n_dup:
        log.info("perrecbench: %d repeated (user, item) ratings; keeping each pair's earliest", n_dup)
        df = df.drop_duplicates(["user_id", "item_id"], keep="first")
    agg = df.groupby(["user_id", "timestamp"], sort=True)["rating"].agg(["sum", "count"])
    prior = agg.groupby(level=0).cumsum() - agg  # sums/counts of ratings strictly earlier
    prior.columns = ["prior_sum", "n_before"]
    df = df.join(prior, on=["user_id", "timestamp"])
    df["n_before"] = df["n_before"].astype("int64")
    if cfg.mean_mode == "before_query":
        with np.errstate(invalid="ignore", divide="ignore"):
            df["avg_rating"] = df["prior_sum"] / df["n_before"]
    else:  # the reference: the mean over the user's whole list, the query rating included
        df["avg_rating"] = df.groupby("user_id")["rating"].transform("mean")
    df["relative_rating"] = df["rating"] - df["avg_rating"]
    item = df.groupby("item_id")["rating"].agg(["sum", "count"])
    s, c = df["item_id"].map(item["sum"]), df["item_id"].map(item["count"])
    loo = (s - df["rating"]) / (c - 1).where(c > 1)
    df["item_avg_rating"] = loo.fillna(float(df["rating"].mean()))
    return df.drop(columns=["prior_sum"]).reset_index(drop=True)


def greedy_spread(values: np.ndarray, gap: float, size: int) -> list[int] | None:
    """Indices of ``size`` values pairwise more than ``gap`` apart (smallest first), or None.

    Picking the smallest value, then the next one more than ``gap`` above the last pick,
    finds the largest such set, so None means no valid set of that size exists.
    """
    order = np.argsort(values, kind="stable")
    picked: list[int] = []
    for i in order:
        if not picked or values[i] - values[picked[-1]] > gap:
            picked.append(int(i))
            if len(picked) == size:
                return picked
    return None


def spread_ok(values: list[float], gap: float) -> bool:
    return all(abs(a - b) > gap for i, a in enumerate(values) for b in values[i + 1:])


def random_spread(values: np.ndarray, gap: float, size: int, rng: random.Random) -> list[int] | None:
    """A random valid subset (random greedy, a few tries), else the smallest-first greedy one."""
    if greedy_spread(values, gap, size) is None:
        return None
    idx = list(range(len(values)))
    for _ in range(_TRIES):
        rng.shuffle(idx)
        picked: list[int] = []
        for i in idx:
            if all(abs(values[i] - values[j]) > gap for j in picked):
                picked.append(i)
                if len(picked) == size:
                    return picked
    return greedy_spread(values, gap, size)


def pick_window(rows: pd.DataFrame, window: float, cfg: GroupConfig, size: int,
                rng: random.Random) -> tuple[int, list[int]] | None:
    """The earliest window of one item's active ratings holding a valid group of ``size``.

    ``rows``: the item's active ratings sorted by time; ``window``: Δt in timestamp units.
    Returns (t0, row positions)."""
    ts = rows["timestamp"].to_numpy()
    rel = rows["relative_rating"].to_numpy()
    for start in range(len(ts)):
        end = int(np.searchsorted(ts, ts[start] + window, side="right"))
        if end - start < size:
            continue
        picked = random_spread(rel[start:end], cfg.min_gap, size, rng)
        if picked is not None:
            return int(ts[start]), [start + p for p in picked]
    return None


def candidate_groups(prepared: pd.DataFrame, cfg: GroupConfig, size: int, tag: str) -> dict[str, dict]:
    """item_id → {"t0", "rows"} for every item with a valid group of ``size`` users."""
    scale = seconds_per_unit(prepared["timestamp"], cfg.timestamp_unit)
    window = cfg.window_days * 86400.0 / scale
    active = prepared[prepared["n_before"] > cfg.min_history]
    active = active.sort_values(["item_id", "timestamp", "user_id"], kind="stable")
    out: dict[str, dict] = {}
    for item_id, rows in active.groupby("item_id", sort=True):
        if len(rows) < size:
            continue
        hit = pick_window(rows, window, cfg, size, stable_rng(cfg.seed, "perrecbench-window", tag, item_id))
        if hit is not None:
            t0, pos = hit
            out[str(item_id)] = {"t0": t0, "t1": int(round(t0 + window)), "rows": [int(rows.index[p]) for p in pos]}
    return out


def _user(prepared: pd.DataFrame, row: int) -> dict:
    r = prepared.loc[row]
    return {"user_id": str(r["user_id"]), "timestamp": int(r["timestamp"]), "rating": float(r["rating"]),
            "avg_rating": float(r["avg_rating"]), "relative_rating": float(r["relative_rating"]),
            "history_len": int(r["n_before"]), "item_avg_rating": float(r["item_avg_rating"])}


def _group(prepared: pd.DataFrame, item_id: str, cand: dict, level: str, split: str, users: list[int]) -> dict:
    prefix = "" if split == "test" else f"{split}-"
    return {"group_id": f"{prefix}{level}-{item_id}", "level": level, "split": split, "item_id": item_id,
            "window": [cand["t0"], cand["t1"]], "users": [_user(prepared, r) for r in users]}


def _split_items(items: list[str], n_test: int, n_heldout: int, seed: int, tag: str,
                 exclude: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    pool = sorted(items)
    stable_rng(seed, "perrecbench-items", tag).shuffle(pool)
    test = pool[:n_test]
    rest = [i for i in pool[n_test:] if i not in exclude]
    return test, rest[:n_heldout]


def build_groups(interactions: pd.DataFrame, cfg: GroupConfig, levels: list[str],
                 prepared: pd.DataFrame | None = None) -> list[dict]:
    """Test and held-out groups for ``levels``.

    Each group: ``group_id, level, split ("test" | "heldout"), item_id, window [t0, t1]``
    and ``users`` (in random order): ``user_id, timestamp, rating, avg_rating,
    relative_rating, history_len`` (ratings strictly before the query) and
    ``item_avg_rating``. Deterministic for a given table and ``cfg.seed``. ``prepared``:
    ``prepare(interactions, cfg)`` when the caller already has it.
    """
    if prepared is None:
        prepared = prepare(interactions, cfg)
    sizes = {lv: cfg.sizes[lv] for lv in levels}
    out: list[dict] = []
    if cfg.same_items:
        full = max(sizes.values())
        cands = candidate_groups(prepared, cfg, full, "all")
        test, held = _split_items(list(cands), cfg.groups_per_level, cfg.heldout_per_level, cfg.seed, "all")
        _warn_short(len(test), cfg.groups_per_level, "all levels", len(cands))
        for lv, size in sizes.items():
            for split, items in (("test", test), ("heldout", held)):
                for item_id in items:
                    rng = stable_rng(cfg.seed, "perrecbench-subset", lv, split, item_id)
                    out.append(_group(prepared, item_id, cands[item_id], lv, split,
                                      rng.sample(cands[item_id]["rows"], size)))
        return out
    per_level = {lv: candidate_groups(prepared, cfg, size, lv) for lv, size in sizes.items()}
    tests = {lv: _split_items(list(c), cfg.groups_per_level, 0, cfg.seed, lv)[0] for lv, c in per_level.items()}
    used = {i for items in tests.values() for i in items}
    for lv, cands in per_level.items():
        _warn_short(len(tests[lv]), cfg.groups_per_level, lv, len(cands))
        held = _split_items(list(cands), cfg.groups_per_level, cfg.heldout_per_level, cfg.seed, lv, used)[1]
        for split, items in (("test", tests[lv]), ("heldout", held)):
            for item_id in items:
                rows = stable_rng(cfg.seed, "perrecbench-order", lv, item_id).sample(cands[item_id]["rows"],
                                                                                    sizes[lv])
                out.append(_group(prepared, item_id, cands[item_id], lv, split, rows))
    return out


def _warn_short(got: int, wanted: int, where: str, pool: int) -> None:
    if got == 0:
        raise DataError(f"perrecbench: no query item has a valid user group ({where}); relax groups.window_days, "
                        "groups.min_history or groups.min_gap, or use larger rating data")
    if got < wanted:
        log.warning("perrecbench: only %d query items have a valid group (%s); using %d of the %d groups asked",
                    pool, where, got, wanted)


def most_common(ratings: list[float]) -> float:
    """The most frequent rating; among equally frequent ones the first seen (the reference's Counter rule)."""
    return float(Counter(ratings).most_common(1)[0][0])
