"""Bootstrap confidence intervals for per-sample metrics, and the one rule for when a CI, p-value or kappa rests
on too few independent units to say much (``MIN_CLUSTERS``, marked ``FEW`` by every table that shows one)."""

from __future__ import annotations

import numpy as np

# the one rule for too few clusters, and the metric-key suffixes it reads (a core module: `llmrec runs` shows them too)
from llmrec.small_samples import CHANCE, CI_CLUSTERS, FEW, FEW_LEGEND, MIN_CLUSTERS, few_clusters, few_mark  # noqa: F401

BOOTSTRAP_CELLS = 4_000_000  # resampled values held at once (float64 values + int64 indices: about 64 MB)


def bootstrap_ci(values, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0,
                 statistic=np.mean) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` (the mean by default; ``np.median`` for medians).
    Constant or single-value data → (v, v); empty → (nan, nan)."""
    x = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    if x.size == 0:
        return float("nan"), float("nan")
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    from scipy import stats  # imported here: ~1 s that Ray workers need not pay

    # scipy resamples ``batch`` × n values at once (all n_resamples by default: 2000 × 300,000 values took 9.9 GB);
    # large inputs go in batches of about BOOTSTRAP_CELLS values, the same resamples in the same order
    batch = None if x.size * n_resamples <= BOOTSTRAP_CELLS else max(1, BOOTSTRAP_CELLS // x.size)
    res = stats.bootstrap((x,), statistic, confidence_level=confidence, n_resamples=n_resamples, batch=batch,
                          method="percentile", random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def mean_with_ci(values, prefix: str, **kw) -> dict[str, float]:
    """``prefix``, its CI bounds and ``<prefix>_ci_clusters``: the values resampled (each its own cluster)."""
    x = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    lo, hi = bootstrap_ci(x, **kw)
    return {prefix: float(np.mean(x)) if x.size else float("nan"), f"{prefix}_ci_low": lo, f"{prefix}_ci_high": hi,
            f"{prefix}{CI_CLUSTERS}": float(x.size)}
