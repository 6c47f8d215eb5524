"""Cleaning of canonical interactions: dedup, implicit-feedback threshold, k-core.

Each function takes and returns a canonical interaction frame; ``apply_filters`` runs
them in the order of ``FilterConfig`` (dedup, threshold, k-core) and logs what each removed.
"""

from __future__ import annotations

import logging

import pandas as pd

from llmrec.errors import DataError
from llmrec.interactions.config import FilterConfig
from llmrec.interactions.schema import ITEM_ID, RATING, TIMESTAMP, USER_ID

logger = logging.getLogger(__name__)


def _time_order(df: pd.DataFrame) -> pd.DataFrame:
    """Stable sort by timestamp (rows without time keep file order, after timed ones)."""
    return df.sort_values(TIMESTAMP, kind="stable", na_position="last")


def dedup(df: pd.DataFrame, policy: str, source: str = "interactions") -> pd.DataFrame:
    """Resolve repeated (user, item) pairs.

    ``keep``: leave them; ``first`` / ``last``: keep the earliest / latest by time (file order
    on ties); ``mean``: one row with the mean rating and the latest timestamp; ``error``: fail.
    """
    dup = df.duplicated([USER_ID, ITEM_ID], keep=False)
    if policy == "keep" or not bool(dup.any()):
        return df
    if policy == "error":
        first = df.loc[dup].iloc[0]
        raise DataError(
            f"{source}: {int(dup.sum())} rows repeat a (user, item) pair, e.g. user {first[USER_ID]!r} "
            f"item {first[ITEM_ID]!r}. Set filters.dedup to first, last, mean or keep."
        )
    ordered = _time_order(df)
    if policy in ("first", "last"):
        out = ordered.drop_duplicates([USER_ID, ITEM_ID], keep=policy)
    elif policy == "mean":
        grouped = ordered.groupby([USER_ID, ITEM_ID], sort=False)
        out = grouped.agg({RATING: "mean", TIMESTAMP: "max"}).reset_index()
    else:
        raise ValueError(f"unknown dedup policy {policy!r}")
    logger.info("dedup=%s: %d -> %d interactions", policy, len(df), len(out))
    return out.sort_index().reset_index(drop=True) if policy != "mean" else out


def threshold(df: pd.DataFrame, min_rating: float | None, binarize: bool = False) -> pd.DataFrame:
    """Implicit feedback: keep ratings ``>= min_rating``; with ``binarize`` set them to 1.0."""
    out = df if min_rating is None else df.loc[df[RATING] >= min_rating]
    if binarize:
        out = out.assign(**{RATING: 1.0})
    if len(out) != len(df):
        logger.info("min_rating=%s: %d -> %d interactions", min_rating, len(df), len(out))
    return out.reset_index(drop=True)


def k_core(df: pd.DataFrame, user_k: int, item_k: int) -> pd.DataFrame:
    """Iteratively drop users with < ``user_k`` and items with < ``item_k`` interactions until stable."""
    if user_k <= 1 and item_k <= 1:
        return df
    out, rounds = df, 0
    while True:
        rounds += 1
        keep = pd.Series(True, index=out.index)
        if user_k > 1:
            keep &= out.groupby(USER_ID)[ITEM_ID].transform("size") >= user_k
        if item_k > 1:
            keep &= out.groupby(ITEM_ID)[USER_ID].transform("size") >= item_k
        if bool(keep.all()):
            break
        out = out.loc[keep]
    logger.info(
        "k-core (users>=%d, items>=%d): %d -> %d interactions in %d rounds", user_k, item_k, len(df), len(out), rounds
    )
    if out.empty:
        raise DataError(f"k-core with user_core={user_k}, item_core={item_k} removed every interaction")
    return out.reset_index(drop=True)


def apply_filters(df: pd.DataFrame, cfg: FilterConfig, source: str = "interactions") -> pd.DataFrame:
    """Run dedup, the implicit threshold and k-core as configured."""
    out = dedup(df, cfg.dedup, source)
    out = threshold(out, cfg.min_rating, cfg.binarize)
    return k_core(out, cfg.user_core, cfg.item_core)
