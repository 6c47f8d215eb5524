"""When a number rests on too few independent units to say much: the one rule (``MIN_CLUSTERS``) and its mark
(``FEW``), shown beside every CI, p-value and kappa computed from fewer clusters, by every table that shows one
(run summary, ``llmrec runs``, compare, judges, leaderboard, report); and the metric-key suffixes that carry a
metric's cluster count and chance level."""

from __future__ import annotations

import math

MIN_CLUSTERS = 10  # a CI, p-value or kappa from fewer clusters than this is marked FEW wherever it is shown
FEW = "†"
FEW_LEGEND = (f"{FEW}: from fewer than {MIN_CLUSTERS} clusters (independent units: users, preferences, items, or "
              "samples where each is its own), too few for the CI / p-value / κ to say much")
CI_CLUSTERS = "_ci_clusters"  # a run's metric key ``<metric>_ci_clusters``: the units its CI resampled
CHANCE = "_chance"  # ``<metric>_chance``: the metric's value under uniform random guessing


def few_clusters(n) -> bool:
    """True when ``n`` (a cluster count) is known and below ``MIN_CLUSTERS``."""
    try:
        n = float(n)
    except (TypeError, ValueError):
        return False
    return math.isfinite(n) and n < MIN_CLUSTERS


def few_mark(n) -> str:
    """``FEW`` when ``n`` clusters are too few (``few_clusters``), else ``""``."""
    return FEW if few_clusters(n) else ""


def finite_number(v) -> float:
    """``v`` as a float, NaN where it is missing, not a number or not finite (a metric read from a run's files)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan
