"""The cost ledger's metric keys and how tables show cost per 1,000 samples (``llmrec runs``, leaderboard, report).

A run's metrics (``RunDir.METRICS``, and its MLflow run) hold ``cost/<key>`` totals and ``cost/<role>/<key>`` per role
(``llmrec.pipelines.runner.cost`` computes them; docs/cost.md lists them). Tables show one compact cell per run:
USD per 1,000 samples where the run had a price table, else tokens per 1,000 samples, else ``—``.
"""

from __future__ import annotations

import math
from typing import Mapping

PREFIX = "cost/"
USD_PER_1K = f"{PREFIX}usd_per_1k_samples"
TOKENS_PER_1K = f"{PREFIX}tokens_per_1k_samples"
COLUMN = "cost/1k"  # the tables' column header: cost per 1,000 samples
FROM_OTHER_RUNS = f"{PREFIX}requests_from_other_runs"  # answers the request cache gave that another run computed
FROM_OTHER_RUNS_ROW = "answers_from_other_runs"  # the run summary's row
MISSING = "—"


def _finite(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def usd_text(v: float) -> str:
    """``$1.23``, ``$0.0123`` (three significant digits below a dollar), ``$123``."""
    if v >= 100:
        return f"${v:.0f}"
    if v >= 1 or v == 0:
        return f"${v:.2f}"
    return f"${v:.3g}"


def tokens_text(v: float) -> str:
    """``812 tok``, ``35.2k tok``, ``1.20M tok``."""
    if v >= 1e6:
        return f"{v / 1e6:.2f}M tok"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k tok"
    return f"{v:.0f} tok"


def per_1k_text(metrics: Mapping) -> str:
    """One run's cost per 1,000 samples as a table cell: USD when priced, else tokens, else ``—``."""
    usd = _finite(metrics.get(USD_PER_1K))
    if usd is not None:
        return usd_text(usd)
    tokens = _finite(metrics.get(TOKENS_PER_1K))
    return tokens_text(tokens) if tokens is not None else MISSING


def other_runs_text(metrics: Mapping) -> str | None:
    """``3 of 24``: of a run's answered engine calls, those the request cache answered with another run's call; None
    without a ledger."""
    other = _finite(metrics.get(FROM_OTHER_RUNS))
    if other is None:
        return None
    calls = (_finite(metrics.get(f"{PREFIX}requests")) or 0) + (_finite(metrics.get(f"{PREFIX}requests_from_cache")) or 0)
    return f"{other:.0f} of {calls:.0f}"
