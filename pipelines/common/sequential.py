"""An anytime-valid confidence sequence for a paired difference at the cluster level, for stopping an evaluation
as soon as a non-inferiority question is decided.

The data: one value per cluster (e.g. a user), the mean over the cluster's units of candidate − baseline, the sign
chosen so that larger is better for the candidate; the values lie in ``[low, high]`` (``[-1, 1]`` for a metric in
[0, 1]). The question is the models' difference on the users they will meet, ``mu``: the benchmark's users are
taken as independent draws from that population (as the cluster bootstrap of ``llmrec compare`` takes them), and
sending them in a seeded random order keeps them independent draws in the order they arrive.

The sequence is the betting confidence sequence for the mean of bounded independent draws (Waudby-Smith and
Ramdas): for a candidate mean ``m`` two capital processes bet for and against it,
``K⁺_t(m) = prod(1 + λ_i (x_i − m))`` and ``K⁻_t(m) = prod(1 − λ_i (x_i − m))`` (values rescaled to [0, 1]).
Under ``mu = m`` both are non-negative supermartingales, so by Ville's inequality the chance that either ever
reaches ``2/α`` is at most ``α/2`` each: the set of ``m`` whose capital never reached it (the running intersection)
covers ``mu`` at every time at once with probability ≥ 1 − α, whenever one looks and whatever one decides from it.
The bets are the predictable plug-in ones (aGRAPA: λ from a regularized running mean and variance, capped at
``c = 1/2`` of the largest bet the range allows).

The version for sampling *without* replacement (the same paper's NeurIPS 2020 predecessor) was tried and not kept:
it estimates the mean of the finite set of users the benchmark holds, so near the margin it decides what this set's
realised difference is rather than the models' (the simulation of ``perf/gate_simulation.py`` showed ~45 % wrong
decisions at the boundary).

- I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86(1), 2024
  (the capital processes, the predictable plug-in and aGRAPA bets, Sec. 4–5).

The PyPI packages ``confseq`` (0.0.11, a C++ extension built from source with scikit-build and an old pybind11,
no wheel for current Pythons, pytest and matplotlib as run-time requirements) and ``expectation`` (0.0.2) were
evaluated and not used: neither installs as a maintained dependency here. The bounds above are closed-form
products, vectorized with numpy.

Decision against a non-inferiority margin ``δ`` (``mu ≥ −δ`` is "not worse"): the sequence's lower bound above
``−δ`` decides **not worse**, its upper bound below ``−δ`` decides **worse**; otherwise undecided. Each wrong decision
has probability ≤ α/2 (the side of the sequence that would make it), at every stopping time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

NOT_WORSE, WORSE, UNDECIDED = "not worse", "worse", "undecided"
CAP = 0.5  # the largest bet, as a share of what keeps the capital non-negative
GRID = 2001  # candidate means the bounds are read from


def _running_moments(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predictable (regularized) running mean and variance of ``y`` in [0, 1] (last axis: time): the entry at t uses
    the draws before t only (the first entry: mean 1/2, variance 1/4)."""
    t = np.arange(1, y.shape[-1] + 1, dtype=float)
    mu = (0.5 + np.cumsum(y, axis=-1)) / (t + 1)
    start = np.full(y.shape[:-1] + (1,), 0.5)
    prev_mu = np.concatenate([start, mu[..., :-1]], axis=-1)
    var = (0.25 + np.cumsum((y - prev_mu) ** 2, axis=-1)) / (t + 1)
    return prev_mu, np.concatenate([start / 2, var[..., :-1]], axis=-1)


def _log_capital(y: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running maxima over time of log K⁺ and log K⁻ for each candidate mean ``m`` in (0, 1) (broadcast against
    ``y``'s leading axes; the last axis of ``y`` is time). The bets are aGRAPA's (Waudby-Smith and Ramdas 2024,
    Sec. 5.3): ``λ = (μ̂ − m) / (σ̂² + (μ̂ − m)²)`` from the draws so far, on the side it favours, capped so that
    every factor stays ≥ 1 − CAP."""
    mu, var = _running_moments(y)
    m = np.clip(m, 1e-12, 1 - 1e-12)
    gap = mu - m
    lam = gap / (var + gap ** 2)
    up = np.clip(lam, 0, CAP / m)
    down = np.clip(-lam, 0, CAP / (1 - m))
    lp = np.log1p(up * (y - m))
    lm = np.log1p(-down * (y - m))
    return (np.maximum.accumulate(np.cumsum(lp, axis=-1), axis=-1),
            np.maximum.accumulate(np.cumsum(lm, axis=-1), axis=-1))


@dataclass(frozen=True)
class SequenceState:
    """Where the sequence stands after ``n`` of ``n_total`` clusters."""

    n: int
    n_total: int
    estimate: float  # the mean cluster-level difference so far
    lower: float
    upper: float
    decision: str  # NOT_WORSE | WORSE | UNDECIDED
    alpha: float
    margin: float
    extra: dict = field(default_factory=dict)

    @property
    def share(self) -> float:
        return self.n / self.n_total if self.n_total else math.nan

    def as_dict(self) -> dict:
        return {"clusters_used": self.n, "clusters_total": self.n_total, "share_used": self.share,
                "estimate": self.estimate, "lower": self.lower, "upper": self.upper, "decision": self.decision,
                "alpha": self.alpha, "margin": self.margin}


def _check(values, n_total: int, low: float, high: float, alpha: float, margin: float) -> np.ndarray:
    x = np.asarray(values, float)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if margin < 0:
        raise ValueError(f"the margin is a distance: ≥ 0, got {margin}")
    if not low < high:
        raise ValueError(f"the values' range [{low}, {high}] is empty")
    if x.shape[-1] > n_total:
        raise ValueError(f"{x.shape[-1]} clusters seen of a population of {n_total}")
    if x.size and (np.nanmin(x) < low - 1e-9 or np.nanmax(x) > high + 1e-9):
        raise ValueError(f"a cluster's difference lies outside [{low}, {high}] (e.g. {x[(x < low) | (x > high)][0]})")
    if np.isnan(x).any():
        raise ValueError("a cluster's difference is NaN")
    return x


def confidence_sequence(values, n_total: int, alpha: float = 0.05, margin: float = 0.0, low: float = -1.0,
                        high: float = 1.0, grid: int = GRID) -> SequenceState:
    """The sequence after the cluster differences ``values`` (in the random order they were drawn) of a population
    of ``n_total`` clusters: its bounds (the running intersection, read on a grid of ``grid`` candidate means) and
    the decision against ``−margin``."""
    x = _check(values, n_total, low, high, alpha, margin)
    n = x.size
    if n == 0:
        return SequenceState(0, n_total, math.nan, low, high, UNDECIDED, alpha, margin)
    width = high - low
    y = (x - low) / width
    m = np.linspace(0.0, 1.0, grid)[:, None]
    up, down = _log_capital(y[None, :], m)
    threshold = math.log(2 / alpha)
    keep = (up[:, -1] < threshold) & (down[:, -1] < threshold)
    kept = m[keep, 0] * width + low
    lower, upper = (float(kept.min()), float(kept.max())) if kept.size else (float(x.mean()), float(x.mean()))
    decision = decide_at(x, n_total, alpha, margin, low, high)[-1]
    return SequenceState(n, n_total, float(x.mean()), lower, upper, decision, alpha, margin)


def decide_at(values, n_total: int, alpha: float = 0.05, margin: float = 0.0, low: float = -1.0,
              high: float = 1.0) -> np.ndarray:
    """The decision after each draw (last axis: time; leading axes: e.g. simulated replications), tested at the
    margin itself: NOT_WORSE once the capital betting on a mean above ``−margin`` reached ``2/α``, WORSE once the one
    betting below did, else UNDECIDED. Exact (no grid), so a simulation of many replications stays fast."""
    x = _check(values, n_total, low, high, alpha, margin)
    y = (x - low) / (high - low)
    m0 = np.asarray((-margin - low) / (high - low))
    up, down = _log_capital(y, m0)
    threshold = math.log(2 / alpha)
    out = np.full(x.shape, UNDECIDED, dtype=object)
    out[down >= threshold] = WORSE
    out[up >= threshold] = NOT_WORSE  # both at once: impossible unless α ≥ 1
    return out


def stopping_index(decisions: np.ndarray) -> np.ndarray:
    """The number of clusters after which each row of ``decide_at`` first decided (its length when never)."""
    decided = decisions != UNDECIDED
    first = decided.argmax(axis=-1) + 1
    return np.where(decided.any(axis=-1), first, decisions.shape[-1])


def cluster_differences(cand, base, clusters, lower_is_better: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(cluster labels, the mean candidate − baseline of each cluster's paired units; sign flipped when lower is
    better, so larger is always better for the candidate)."""
    cand, base = np.asarray(cand, float), np.asarray(base, float)
    labels, idx = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = labels.size
    d = np.bincount(idx, cand - base, k) / np.bincount(idx, minlength=k)
    return labels, (-d if lower_is_better else d)
