"""The Beyond Utility metrics (reference: EvaLLMasRecommender ``eva/codes/llm_metrics.py``), pure numpy.

Inputs are already validated (``contract.py``): per user a target, the candidates as presented, the
ranked id list (0 = hallucinated title), the history length and the base candidate set. Every
formula is the one written in the score contract (README "Score contract"); an undefined value
is ``float('nan')`` (written as the string ``"NaN"`` in M.json).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METRIC_KEYS = ("hr", "ndcg", "aplt", "arp", "popreo", "serendipity", "self_information", "gini", "dpd",
               "jain", "item_coverage", "shannon", "jaccard", "hallucination")
NAN = float("nan")

_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed trapz


@dataclass(frozen=True)
class Catalog:
    """What the items file says: training frequency and categories per id, the user count."""

    train_freq: dict[int, int]
    categories: dict[int, tuple[str, ...]]
    n_users: int
    history_len_median: float | None = None

    def freq(self, ids) -> np.ndarray:
        return np.array([self.train_freq.get(int(i), 0) for i in ids], dtype=float)

    def quantile(self, q) -> np.ndarray | float:
        observed = np.array([f for f in self.train_freq.values() if f > 0], dtype=float)
        if observed.size == 0:
            return np.full(np.shape(q), np.nan) if np.ndim(q) else NAN
        return np.quantile(observed, q)


@dataclass(frozen=True)
class UserLine:
    user_id: str
    target: int
    candidates: tuple[int, ...]
    ranked: tuple[int, ...]
    history_len: int
    base_candidates: tuple[int, ...]

    @property
    def base_set(self) -> frozenset[int]:
        return frozenset(self.base_candidates) | {self.target}


def ranks(users: list[UserLine]) -> np.ndarray:
    """1 + first index of the target in ``ranked``; ``len(candidates)`` when absent (reference :434)."""
    out = []
    for u in users:
        out.append(u.ranked.index(u.target) + 1 if u.target in u.ranked else len(u.candidates))
    return np.array(out, dtype=float)


def hits_and_ndcg(users: list[UserLine], k: int) -> tuple[np.ndarray, np.ndarray]:
    r = ranks(users)
    hit = (r <= k).astype(float)
    return hit, hit / np.log2(r + 1)


def top_k(users: list[UserLine], k: int) -> np.ndarray:
    """S: every user's first K ids, concatenated (duplicates and 0 kept)."""
    return np.array([i for u in users for i in u.ranked[:k]], dtype=np.int64)


def arp(s: np.ndarray, cat: Catalog) -> float:
    return float(np.mean(cat.freq(s)))


def aplt(s: np.ndarray, cat: Catalog) -> float:
    f = cat.freq(s)
    return float(np.mean((f > 0) & (f < cat.quantile(0.8))))


def self_information(s: np.ndarray, cat: Catalog) -> float:
    f = cat.freq(s)
    info = np.zeros_like(f)
    seen = f > 0
    info[seen] = np.log2(cat.n_users / f[seen])
    return float(np.mean(info))


def popreo(users: list[UserLine], hit: np.ndarray, cat: Catalog) -> float:
    """std/mean of the HR in 5 target-popularity bins ``(q[b], q[b+1]]``; NaN for an empty bin or mean 0."""
    q = np.array(cat.quantile(np.arange(0, 1.2, 0.2)), dtype=float)
    q[0] -= 1
    f = cat.freq([u.target for u in users])
    bins = []
    for b in range(5):
        inside = (f > q[b]) & (f <= q[b + 1])
        if not inside.any():
            return NAN
        bins.append(hit[inside].mean())
    bins = np.array(bins)
    return NAN if bins.mean() == 0 else float(np.std(bins) / np.mean(bins))


def mostpop_hits(users: list[UserLine], cat: Catalog, k: int) -> np.ndarray:
    """MostPop over B_u by training frequency, the target first among ties (its rank = 1 + #more popular)."""
    out = []
    for u in users:
        ft = cat.train_freq.get(u.target, 0)
        more = sum(1 for c in u.base_set if c != u.target and cat.train_freq.get(c, 0) > ft)
        out.append(1.0 if 1 + more <= k else 0.0)
    return np.array(out)


def gini(s: np.ndarray) -> float:
    _, counts = np.unique(s, return_counts=True)
    c = np.sort(counts).astype(float)
    m = len(c)
    y = np.cumsum(c) / c.sum()
    x = np.arange(m) / m
    return float(1 - 2 * _trapezoid(y, x))


def dpd(users: list[UserLine], ndcg: np.ndarray, median: float) -> float:
    h = np.array([u.history_len for u in users], dtype=float)
    hot, cold = ndcg[h > median], ndcg[h <= median]
    if hot.size == 0 or cold.size == 0:
        return NAN
    return float(abs(hot.mean() - cold.mean()))


def jain(ndcg: np.ndarray) -> float:
    sq = float(np.sum(ndcg ** 2))
    return NAN if sq == 0 else float(np.sum(ndcg) ** 2 / (len(ndcg) * sq))


def item_coverage(users: list[UserLine], s: np.ndarray) -> float:
    pool = frozenset().union(*(u.base_set for u in users))
    return float(len(np.unique(s)) / len(pool))


def shannon(users: list[UserLine], cat: Catalog, k: int) -> float:
    per_user = []
    for u in users:
        counts: dict[str, int] = {}
        for i in u.ranked[:k]:
            for c in set(cat.categories.get(int(i), ())):
                counts[c] = counts.get(c, 0) + 1
        p = np.array(list(counts.values()), dtype=float) / k
        per_user.append(float(-np.sum(p * np.log(p))) if p.size else 0.0)
    return float(np.mean(per_user))


def _incidence(sets: list[frozenset[int]], index: dict[int, int]) -> np.ndarray:
    m = np.zeros((len(sets), len(index)), dtype=np.int64)
    for r, s in enumerate(sets):
        m[r, [index[i] for i in s]] = 1
    return m


def jaccard(users: list[UserLine], k: int) -> float:
    """Mean over pairs u<v whose base sets overlap of |S_u ∩ S_v| / |B_u ∩ B_v| (0 is an id)."""
    tops = [frozenset(u.ranked[:k]) for u in users]
    bases = [u.base_set for u in users]
    index = {i: n for n, i in enumerate(sorted(frozenset().union(*tops, *bases)))}
    top_m, base_m = _incidence(tops, index), _incidence(bases, index)
    inter_s, inter_b = top_m @ top_m.T, base_m @ base_m.T
    iu = np.triu_indices(len(users), k=1)
    num, den = inter_s[iu].astype(float), inter_b[iu].astype(float)
    keep = den > 0
    return NAN if not keep.any() else float(np.mean(num[keep] / den[keep]))


def hallucination(users: list[UserLine]) -> float:
    slots = np.array([i for u in users for i in u.ranked])
    return float(np.mean(slots == 0))


def compute(users: list[UserLine], cat: Catalog, k: int) -> dict[str, float]:
    """All 14 metrics of the contract for one set of user lines."""
    hit, ndcg = hits_and_ndcg(users, k)
    s = top_k(users, k)
    median = cat.history_len_median
    if median is None:
        median = float(np.median([u.history_len for u in users]))
    return {
        "hr": float(hit.mean()),
        "ndcg": float(ndcg.mean()),
        "aplt": aplt(s, cat),
        "arp": arp(s, cat),
        "popreo": popreo(users, hit, cat),
        "serendipity": float(np.mean(hit * (1 - mostpop_hits(users, cat, k)))),
        "self_information": self_information(s, cat),
        "gini": gini(s),
        "dpd": dpd(users, ndcg, median),
        "jain": jain(ndcg),
        "item_coverage": item_coverage(users, s),
        "shannon": shannon(users, cat, k),
        "jaccard": jaccard(users, k),
        "hallucination": hallucination(users),
    }
