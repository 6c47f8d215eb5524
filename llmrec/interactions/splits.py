"""Train / valid / test splits and sampled candidate negatives.

Protocols (``SplitConfig.protocol``):

- ``loo``: leave-one-out by time (ReChorus, Beyond Utility): per user the latest interaction
  is test, the one before it valid, the rest train. Users with one interaction fail; users
  with two get train + test.
- ``random``: RecBole's ``RS`` split: each user's interactions are shuffled (seeded) and cut
  by ``ratios``; small users keep at least one train interaction.
- ``temporal``: one global time cut by ``ratios``; valid/test rows of users or items never
  seen in train are dropped (they cannot be ranked).

Every split carries ``protocol``, a JSON-able record of how it was made, logged with each run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from llmrec.errors import DataError
from llmrec.interactions.config import SplitConfig
from llmrec.interactions.schema import ITEM_ID, TIMESTAMP, USER_ID

logger = logging.getLogger(__name__)
PHASES = ("train", "valid", "test")


@dataclass(frozen=True)
class Split:
    """Three canonical interaction frames plus the record of how they were made."""

    train: pd.DataFrame
    valid: pd.DataFrame
    test: pd.DataFrame
    protocol: dict = field(default_factory=dict)

    @classmethod
    def from_frames(
        cls, train: pd.DataFrame, valid: pd.DataFrame, test: pd.DataFrame, protocol: dict | None = None
    ) -> "Split":
        """Wrap pre-made frames (e.g. another library's split) as a ``Split``."""
        frames = [f.reset_index(drop=True) for f in (train, valid, test)]
        record = dict(protocol or {"protocol": "given"})
        record.update({f"n_{p}": len(f) for p, f in zip(PHASES, frames)})
        return cls(*frames, protocol=record)


def split_interactions(df: pd.DataFrame, cfg: SplitConfig, source: str = "interactions") -> Split:
    """Split ``df`` as ``cfg.protocol`` says; the result records the protocol and its counts. No interactions at
    all is a ``DataError`` naming the source."""
    if len(df) == 0:
        raise DataError(f"{source}: no interactions to split (the file holds none, or the filters removed them all)")
    if cfg.protocol == "loo":
        parts = leave_one_out(df, source)
    elif cfg.protocol == "random":
        parts = random_split(df, cfg.ratios, cfg.seed, cfg.group_by_user)
    else:
        parts = temporal_split(df, cfg.ratios, source)
    record = cfg.model_dump(mode="json")
    split = Split.from_frames(*parts, protocol=record)
    logger.info(
        "split %s: train %d, valid %d, test %d", cfg.protocol, len(split.train), len(split.valid), len(split.test)
    )
    return split


def _require_time(df: pd.DataFrame, protocol: str, source: str) -> None:
    if df[TIMESTAMP].isna().any():
        n = int(df[TIMESTAMP].isna().sum())
        raise DataError(
            f"{source}: the {protocol} split needs timestamps, but {n} interactions have none. Use split.protocol: random."
        )


def leave_one_out(df: pd.DataFrame, source: str = "interactions") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per user, by time (file order on ties): last -> test, second last -> valid, rest -> train."""
    _require_time(df, "leave-one-out", source)
    ordered = df.reset_index(drop=True).sort_values([USER_ID, TIMESTAMP], kind="stable")
    size = ordered.groupby(USER_ID)[ITEM_ID].transform("size")
    if bool((size < 2).any()):
        users = ordered.loc[size < 2, USER_ID].unique()
        raise DataError(
            f"{source}: leave-one-out needs at least 2 interactions per user; {len(users)} user(s) have 1 "
            f"(first: {list(users[:5])}). Add filters.user_core: 3 (or more)."
        )
    from_end = ordered.groupby(USER_ID).cumcount(ascending=False)
    test = ordered.loc[from_end == 0]
    valid = ordered.loc[(from_end == 1) & (size >= 3)]
    train = ordered.loc[~ordered.index.isin(test.index) & ~ordered.index.isin(valid.index)]
    return train, valid, test


def split_counts(n: np.ndarray, ratios: tuple[float, float, float]) -> np.ndarray:
    """Per-group (train, valid, test) sizes: floor of each share, rest to train, and a group
    too small for a share of one still gets one valid/test row while train keeps >= 1."""
    n = np.asarray(n, dtype=np.int64)
    cnt = np.stack([np.floor(r * n).astype(np.int64) for r in ratios], axis=1)
    cnt[:, 0] = n - cnt[:, 1:].sum(axis=1)
    for j in (2, 1):
        share = ratios[j] * n
        bump = (cnt[:, 0] > 1) & (share > 0) & (share < 1)
        cnt[bump, j] += 1
        cnt[bump, 0] -= 1
    return cnt


def random_split(
    df: pd.DataFrame, ratios: tuple[float, float, float], seed: int, group_by_user: bool = True
) -> tuple[pd.DataFrame, ...]:
    """RecBole ``RS``: shuffle (seeded), then cut each user's (or all) interactions by ``ratios``."""
    rng = np.random.default_rng(seed)
    shuffled = df.reset_index(drop=True).iloc[rng.permutation(len(df))]
    if group_by_user:
        shuffled = shuffled.sort_values(USER_ID, kind="stable")
        pos = shuffled.groupby(USER_ID).cumcount().to_numpy()
        sizes = shuffled.groupby(USER_ID)[ITEM_ID].transform("size").to_numpy()
    else:
        pos, sizes = np.arange(len(shuffled)), np.full(len(shuffled), len(shuffled))
    uniq, inverse = np.unique(sizes, return_inverse=True)
    cnt = split_counts(uniq, ratios)[inverse]
    phase = np.where(pos < cnt[:, 0], 0, np.where(pos < cnt[:, 0] + cnt[:, 1], 1, 2))
    return tuple(shuffled.loc[phase == p].sort_index() for p in range(3))


def temporal_split(
    df: pd.DataFrame, ratios: tuple[float, float, float], source: str = "interactions"
) -> tuple[pd.DataFrame, ...]:
    """Global time cut: the earliest ``ratios[0]`` of interactions train, then valid, then test."""
    _require_time(df, "temporal", source)
    ordered = df.reset_index(drop=True).sort_values(TIMESTAMP, kind="stable")
    n = len(ordered)
    a = int(round(ratios[0] * n))
    b = a + int(round(ratios[1] * n))
    train, valid, test = ordered.iloc[:a], ordered.iloc[a:b], ordered.iloc[b:]
    users, items = set(train[USER_ID]), set(train[ITEM_ID])
    kept = []
    for part in (valid, test):
        ok = part[USER_ID].isin(users) & part[ITEM_ID].isin(items)
        if not bool(ok.all()):
            logger.info("temporal split: dropped %d rows with users/items unseen in train", int((~ok).sum()))
        kept.append(part.loc[ok])
    return train, kept[0], kept[1]


def sample_negatives(split: Split, phase: str, num: int, seed: int, sampler: str = "uniform") -> pd.DataFrame:
    """For each user of ``phase``: ``num`` distinct items (seen in train) the user never touched.

    Returns ``user_id`` and ``negatives`` (a list of item ids), users sorted, reproducible by
    ``seed``. The two phases draw from independent streams (``(seed, phase)``), so validation
    and test never share a negative set by construction. ``sampler``: ``uniform`` over the train
    catalogue, or ``popularity`` (probability proportional to the item's train count).
    """
    if phase not in ("valid", "test"):
        raise ValueError(f"phase must be valid or test, got {phase!r}")
    if sampler not in ("uniform", "popularity"):
        raise ValueError(f"sampler must be uniform or popularity, got {sampler!r}")
    counts = split.train[ITEM_ID].value_counts()
    catalogue = np.array(sorted(counts.index), dtype=object)
    index = {item: k for k, item in enumerate(catalogue)}
    prob = None
    if sampler == "popularity":
        weights = counts.reindex(catalogue).to_numpy(np.float64)
        prob = weights / weights.sum()
    every = pd.concat([split.train, split.valid, split.test])
    seen = every.groupby(USER_ID)[ITEM_ID].agg(lambda s: {index[i] for i in s if i in index})
    rng = np.random.default_rng([seed, ("valid", "test").index(phase)])
    users = sorted(getattr(split, phase)[USER_ID].unique())
    out = []
    for user in users:
        banned = seen.get(user, set())
        free = len(catalogue) - len(banned)
        if free < num:
            raise DataError(f"user {user!r} has only {free} untouched items; cannot sample {num} negatives")
        picked: list[int] = []
        chosen: set[int] = set()
        while len(picked) < num:
            for k in rng.choice(len(catalogue), size=2 * (num - len(picked)) + 8, p=prob):
                k = int(k)
                if k not in banned and k not in chosen:
                    chosen.add(k)
                    picked.append(k)
                    if len(picked) == num:
                        break
        out.append(list(catalogue[picked]))
    return pd.DataFrame({USER_ID: users, "negatives": out})
