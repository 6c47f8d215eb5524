"""Agreement between two judges on the same decisions: raw agreement, Cohen's kappa with a cluster bootstrap CI,
the confusion matrix.

Input: one row per judged unit both judges answered (``decision``, ``cluster``, ``label_a``, ``label_b``). Per
decision, kappa is sklearn's ``cohen_kappa_score``; its CI is a percentile bootstrap that resamples whole clusters
(a user's units stay together, as in ``llmrec compare``): each cluster's confusion counts are summed with
multinomial weights, so a resample costs one matrix product instead of a refit. A resample whose labels leave
kappa undefined (one label only on both sides) is left out of the CI.

A judge answer that could not be read has the label :data:`UNREADABLE`: its own outcome, counted per judge
(``unreadable_a`` / ``unreadable_b``) and shown as a row / column of the confusion matrix, never read as a yes or
a no. Agreement and kappa are computed over the units both judges answered readably (``n_read``); kappa is
refused (NaN, ``kappa_refused`` says why) when either judge's answers could not be read for more than
:data:`MAX_UNREADABLE_SHARE` of the units: agreement with a judge that mostly failed measures its failures.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

PAIR_COLUMNS = ["decision", "sample_id", "unit", "cluster", "label_a", "label_b"]
UNREADABLE = "unreadable"  # the label of an unreadable judge answer (= llmrec.pipelines.protocol.UNREADABLE)
MAX_UNREADABLE_SHARE = 0.5  # a judge whose answers could not be read for more of the units than this: no kappa


@dataclass
class DecisionAgreement:
    decision: str
    n: int  # paired units
    n_clusters: int
    agreement: float  # share of units with the same label
    agreement_ci_low: float
    agreement_ci_high: float
    kappa: float  # Cohen's kappa (NaN when undefined: one label only on both sides)
    kappa_ci_low: float
    kappa_ci_high: float
    labels: list[str] = field(default_factory=list)  # the confusion matrix's row / column labels
    confusion: list[list[int]] = field(default_factory=list)  # rows: judge A's label, columns: judge B's
    unreadable_a: int = 0  # units whose judge A answer could not be read
    unreadable_b: int = 0
    n_read: int = 0  # units both judges answered readably: what agreement and kappa are computed over
    kappa_refused: str | None = None  # why kappa is not given (a judge that mostly failed, nothing read by both)

    def as_dict(self) -> dict:
        return asdict(self)


def _label(v) -> str:
    return str(v).lower() if isinstance(v, (bool, np.bool_)) else str(v)


def kappa_from_counts(m: np.ndarray) -> np.ndarray:
    """Cohen's kappa of confusion matrices ``m`` (..., K, K); NaN where chance agreement is 1."""
    n = m.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        po = np.trace(m, axis1=-2, axis2=-1) / n
        pe = (m.sum(axis=-1) * m.sum(axis=-2)).sum(axis=-1) / n**2
        return np.where(np.isclose(pe, 1.0), np.nan, (po - pe) / (1 - pe))


def _percentile(values: np.ndarray, confidence: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def refusal(n: int, unreadable_a: int, unreadable_b: int, n_read: int,
            max_share: float = MAX_UNREADABLE_SHARE) -> str | None:
    """Why kappa is not given for a decision of ``n`` units: a judge whose answers could not be read for more than
    ``max_share`` of them (``judge B failed 100% of its calls (6 of 6)``), or no unit both answered; else None."""
    for side, bad in (("A", unreadable_a), ("B", unreadable_b)):
        if n and bad / n > max_share:
            return (f"judge {side} failed {bad / n:.0%} of its calls ({bad} of {n} unreadable; more than "
                    f"{max_share:.0%})")
    if n_read == 0:
        return "no unit both judges answered readably"
    return None


def decision_agreement(pairs: pd.DataFrame, resamples: int = 2000, seed: int = 0,
                       confidence: float = 0.95, max_unreadable_share: float = MAX_UNREADABLE_SHARE
                       ) -> list[DecisionAgreement]:
    """One ``DecisionAgreement`` per decision of ``pairs`` (``PAIR_COLUMNS``), in first-seen order."""
    from sklearn.metrics import cohen_kappa_score

    out = []
    rng = np.random.default_rng(seed)
    for decision, g in pairs.groupby("decision", sort=False):
        a_all, b_all = g["label_a"].map(_label).to_numpy(), g["label_b"].map(_label).to_numpy()
        shown = sorted(set(a_all) | set(b_all), key=lambda x: (x == UNREADABLE, x))  # unreadable last
        index = {lab: i for i, lab in enumerate(shown)}
        total = np.zeros((len(shown), len(shown)), dtype=int)
        np.add.at(total, ([index[x] for x in a_all], [index[x] for x in b_all]), 1)
        bad_a, bad_b = int(np.sum(a_all == UNREADABLE)), int(np.sum(b_all == UNREADABLE))
        read = (a_all != UNREADABLE) & (b_all != UNREADABLE)
        a, b = a_all[read], b_all[read]
        refused = refusal(len(g), bad_a, bad_b, int(read.sum()), max_unreadable_share)
        labels = sorted(set(a) | set(b))
        k = len(labels)
        agree, agree_lo, agree_hi = (float(np.mean(a == b)), math.nan, math.nan) if read.any() else (math.nan,) * 3
        kappa = kappa_lo = kappa_hi = math.nan
        clusters = np.unique(g["cluster"].astype(str).to_numpy())
        if read.any():
            read_clusters, cl_idx = np.unique(g["cluster"].astype(str).to_numpy()[read], return_inverse=True)
            pos = {lab: i for i, lab in enumerate(labels)}
            counts = np.zeros((len(read_clusters), k, k))
            np.add.at(counts, (cl_idx, [pos[x] for x in a], [pos[x] for x in b]), 1)
            weights = rng.multinomial(len(read_clusters), np.full(len(read_clusters), 1 / len(read_clusters)),
                                      size=resamples)
            boot = np.tensordot(weights, counts, axes=(1, 0))  # (resamples, k, k)
            n_boot = boot.sum(axis=(1, 2))
            agree_lo, agree_hi = _percentile(np.trace(boot, axis1=1, axis2=2) / np.where(n_boot == 0, np.nan, n_boot),
                                             confidence)
            if refused is None and k > 1:
                kappa = float(cohen_kappa_score(a, b, labels=labels))
                kappa = kappa if math.isfinite(kappa) else math.nan
                kappa_lo, kappa_hi = _percentile(kappa_from_counts(boot), confidence)
        out.append(DecisionAgreement(str(decision), int(len(g)), int(len(clusters)), agree, agree_lo, agree_hi,
                                     kappa, kappa_lo, kappa_hi, shown, total.tolist(), bad_a, bad_b,
                                     int(read.sum()), refused))
    return out
