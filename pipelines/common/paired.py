"""Paired comparison of two runs on the same units: the difference B − A of a metric with a cluster
bootstrap CI, an exact McNemar test or a permutation test, and Holm's correction.

Pairs (a_i, b_i) belong to clusters (e.g. a user's samples). Clusters are the unit of resampling:
the bootstrap draws whole clusters with replacement and the permutation test swaps A and B within
whole clusters, so correlated samples of one cluster never count as independent evidence.

Which test: binary outcomes (every value 0 or 1) summarized by their mean, with every cluster a
single pair → exact McNemar (statsmodels; only discordant pairs count). Otherwise → a paired
permutation test (scipy ``permutation_test``, ``permutation_type="samples"``) whose units are the
clusters: swapping a cluster's A and B values together is a sign flip of the cluster's differences.
For mean metrics the clusters enter as (sum of A, sum of B) so the statistic stays vectorized; for
median metrics the statistic recomputes both medians from the swapped clusters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Statistic = Literal["mean", "median"]
_STAT = {"mean": np.mean, "median": np.median}


@dataclass(frozen=True)
class PairedResult:
    n_pairs: int
    n_clusters: int
    value_a: float
    value_b: float
    diff: float  # statistic(B) − statistic(A)
    ci_low: float
    ci_high: float
    p: float
    test: str  # "mcnemar-exact" | "permutation-cluster" | "permutation" | "none"


def _cluster_index(clusters) -> tuple[np.ndarray, int]:
    _, idx = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    return idx, int(idx.max()) + 1 if idx.size else 0


def cluster_bootstrap_diffs(a, b, clusters, statistic: Statistic = "mean", n_resamples: int = 2000,
                            seed: int = 0) -> np.ndarray:
    """``n_resamples`` bootstrap draws of statistic(B) − statistic(A), resampling whole clusters with replacement
    (pairs stay together). Fewer than two clusters: the observed difference alone."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    idx, k = _cluster_index(clusters)
    diff = _STAT[statistic](b) - _STAT[statistic](a) if a.size else math.nan
    if k < 2:
        return np.array([diff])
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(k, np.full(k, 1 / k), size=n_resamples)  # times each cluster is drawn
    if statistic == "mean":
        sums, counts = np.bincount(idx, b - a, k), np.bincount(idx, minlength=k).astype(float)
        return (weights @ sums) / (weights @ counts)
    members = [np.flatnonzero(idx == c) for c in range(k)]
    boot = np.empty(n_resamples)
    for i, w in enumerate(weights):
        rows = np.concatenate([np.tile(members[c], w[c]) for c in np.flatnonzero(w)])
        boot[i] = np.median(b[rows]) - np.median(a[rows])
    return boot


def cluster_bootstrap_ci(a, b, clusters, statistic: Statistic = "mean", confidence: float = 0.95,
                         n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of statistic(B) − statistic(A), resampling whole clusters with replacement
    (pairs stay together; ``cluster_bootstrap_diffs``). One cluster or constant differences: a zero-width interval."""
    boot = cluster_bootstrap_diffs(a, b, clusters, statistic, n_resamples, seed)
    if boot.size == 1:
        return float(boot[0]), float(boot[0])
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    return float(lo), float(hi)


def cluster_bootstrap_ci1(values, clusters, statistic: Statistic = "mean", confidence: float = 0.95,
                          n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of statistic(values) alone (one run's metric), resampling whole clusters with replacement:
    ``cluster_bootstrap_ci`` of the values against zeros. Fewer than two clusters: a zero-width interval."""
    b = np.asarray(values, float)
    return cluster_bootstrap_ci(np.zeros_like(b), b, clusters, statistic, confidence, n_resamples, seed)


@dataclass(frozen=True)
class GroupDifference:
    """mean(in) − mean(out) of one run's per-unit values split by a flag, e.g. a subject's score on the items it
    memorized against the items it did not."""

    n_in: int
    n_out: int
    n_clusters: int
    mean_in: float
    mean_out: float
    diff: float
    ci_low: float
    ci_high: float


def group_difference(values, flags, clusters, confidence: float = 0.95, n_resamples: int = 2000,
                     seed: int = 0) -> GroupDifference:
    """mean(values where flag) − mean(values where not), with a percentile CI that resamples whole clusters with
    replacement (a user's units stay together, whichever side each is on); a draw that leaves one side empty is
    dropped. Either side empty, or fewer than two clusters: the difference (or NaN) with a zero-width interval."""
    values, flags = np.asarray(values, float), np.asarray(flags, bool)
    idx, k = _cluster_index(clusters)
    n_in, n_out = int(flags.sum()), int((~flags).sum())
    mean_in = float(values[flags].mean()) if n_in else math.nan
    mean_out = float(values[~flags].mean()) if n_out else math.nan
    diff = mean_in - mean_out
    lo = hi = diff
    if n_in and n_out and k >= 2:
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(k, np.full(k, 1 / k), size=n_resamples).astype(float)
        side = flags.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = ((weights @ np.bincount(idx, values * side, k)) / (weights @ np.bincount(idx, side, k))
                    - (weights @ np.bincount(idx, values * (1 - side), k)) / (weights @ np.bincount(idx, 1 - side, k)))
        boot = boot[np.isfinite(boot)]
        if boot.size:
            alpha = (1 - confidence) / 2
            lo, hi = (float(q) for q in np.quantile(boot, [alpha, 1 - alpha]))
    return GroupDifference(n_in, n_out, k, mean_in, mean_out, diff, lo, hi)


def mcnemar_exact(a, b) -> float:
    """Exact McNemar p-value (statsmodels) of paired binary outcomes."""
    from statsmodels.stats.contingency_tables import mcnemar

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    return float(mcnemar(table, exact=True).pvalue)


def cluster_permutation_p(a, b, clusters, statistic: Statistic = "mean", n_resamples: int = 9999,
                          seed: int = 0) -> float:
    """Two-sided p-value of statistic(B) − statistic(A) under swaps of A and B within whole clusters
    (scipy ``permutation_test``, ``permutation_type="samples"``; exact when 2^clusters ≤ n_resamples)."""
    from scipy import stats

    a, b = np.asarray(a, float), np.asarray(b, float)
    idx, k = _cluster_index(clusters)
    if k == 0 or np.all(a == b):
        return 1.0
    rng = np.random.default_rng(seed)
    if statistic == "mean":
        n = a.size
        res = stats.permutation_test((np.bincount(idx, a, k), np.bincount(idx, b, k)),
                                     lambda x, y, axis: (np.sum(y, axis=axis) - np.sum(x, axis=axis)) / n,
                                     permutation_type="samples", vectorized=True, n_resamples=n_resamples,
                                     random_state=rng)
        return float(res.pvalue)
    members = [np.flatnonzero(idx == c) for c in range(k)]
    pool = [a[m] for m in members] + [b[m] for m in members]  # unit c: A values at c, B values at k + c

    def stat(x, y):
        return float(np.median(np.concatenate([pool[i] for i in y])) -
                     np.median(np.concatenate([pool[i] for i in x])))

    res = stats.permutation_test((np.arange(k), np.arange(k) + k), stat, permutation_type="samples",
                                 vectorized=False, n_resamples=n_resamples, random_state=rng)
    return float(res.pvalue)


def paired_compare(a, b, clusters, statistic: Statistic = "mean", confidence: float = 0.95,
                   n_resamples: int = 2000, n_permutations: int = 9999, seed: int = 0) -> PairedResult:
    """Everything one comparison row needs (see the module docstring for which test is used)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    _, k = _cluster_index(clusters)
    if a.size == 0:
        nan = math.nan
        return PairedResult(0, 0, nan, nan, nan, nan, nan, nan, "none")
    fn = _STAT[statistic]
    lo, hi = cluster_bootstrap_ci(a, b, clusters, statistic, confidence, n_resamples, seed)
    binary = statistic == "mean" and np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()
    if binary and k == a.size:
        p, test = mcnemar_exact(a, b), "mcnemar-exact"
    else:
        p = cluster_permutation_p(a, b, clusters, statistic, n_permutations, seed)
        test = "permutation" if k == a.size else "permutation-cluster"
    return PairedResult(int(a.size), k, float(fn(a)), float(fn(b)), float(fn(b) - fn(a)), lo, hi, p, test)


def holm(pvalues) -> list[float]:
    """Holm-adjusted p-values (statsmodels ``multipletests``); NaN entries stay NaN and are not counted."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return [float(x) for x in out]
