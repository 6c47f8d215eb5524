"""Agreement between two judges on the same decisions: raw agreement, Cohen's kappa with a cluster bootstrap CI,
the confusion matrix.

Input: one row per judged unit both judges answered (``decision``, ``cluster``, ``label_a``, ``label_b``). Per
decision, kappa is sklearn's ``cohen_kappa_score``; its CI is a percentile bootstrap that resamples whole clusters
(a user's units stay together, as in ``llmrec compare``): each cluster's confusion counts are summed with
multinomial weights, so a resample costs one matrix product instead of a refit. A resample whose labels leave
kappa undefined (one label only on both sides) is left out of the CI.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

PAIR_COLUMNS = ["decision", "sample_id", "unit", "cluster", "label_a", "label_b"]


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

    def as_dict(self) -> dict:
        return asdict(self)


def _label(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


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


def decision_agreement(pairs: pd.DataFrame, resamples: int = 2000, seed: int = 0,
                       confidence: float = 0.95) -> list[DecisionAgreement]:
    """One ``DecisionAgreement`` per decision of ``pairs`` (``PAIR_COLUMNS``), in first-seen order."""
    from sklearn.metrics import cohen_kappa_score

    out = []
    rng = np.random.default_rng(seed)
    for decision, g in pairs.groupby("decision", sort=False):
        a, b = g["label_a"].map(_label).to_numpy(), g["label_b"].map(_label).to_numpy()
        labels = sorted(set(a) | set(b))
        index = {lab: i for i, lab in enumerate(labels)}
        k = len(labels)
        clusters, cl_idx = np.unique(g["cluster"].astype(str).to_numpy(), return_inverse=True)
        counts = np.zeros((len(clusters), k, k))
        np.add.at(counts, (cl_idx, [index[x] for x in a], [index[x] for x in b]), 1)
        total = counts.sum(axis=0)
        kappa = float(cohen_kappa_score(a, b, labels=labels)) if k > 1 else math.nan
        if not math.isfinite(kappa):
            kappa = math.nan
        weights = rng.multinomial(len(clusters), np.full(len(clusters), 1 / len(clusters)), size=resamples)
        boot = np.tensordot(weights, counts, axes=(1, 0))  # (resamples, k, k)
        n_boot = boot.sum(axis=(1, 2))
        agree_boot = np.trace(boot, axis1=1, axis2=2) / np.where(n_boot == 0, np.nan, n_boot)
        kappa_lo, kappa_hi = _percentile(kappa_from_counts(boot), confidence) if k > 1 else (math.nan, math.nan)
        agree_lo, agree_hi = _percentile(agree_boot, confidence)
        out.append(DecisionAgreement(str(decision), int(len(g)), int(len(clusters)), float(np.mean(a == b)),
                                     agree_lo, agree_hi, kappa, kappa_lo, kappa_hi, labels,
                                     total.astype(int).tolist()))
    return out
