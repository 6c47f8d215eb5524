"""Scored rows → metrics.

Over the answered items (a failed engine call is counted in ``failed``, not as a miss):
``coverage`` (memorized: the reference's fuzzy match), ``coverage_exact``, ``coverage_normalised``, each with a
95 % bootstrap CI over units (``_ci_low`` / ``_ci_high``; ``_ci_clusters``: the units resampled: items, or users
for the user and interaction probes, whose rows are resampled together); ``mean_similarity``; ``n_samples`` (rows
asked), ``n_answered``, ``failed``; per popularity bucket ``pop/<bucket>/coverage`` (+ CI, ``/coverage_exact``,
``/coverage_normalised``, ``/n``; item and attribute probes). Without interaction data there are no buckets.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from llmrec.pipelines.common.paired import cluster_bootstrap_ci1
from llmrec.pipelines.common.stats import CI_CLUSTERS

MATCHES = {"coverage": "correct", "coverage_exact": "exact", "coverage_normalised": "normalised"}


def _block(rows: list[dict], prefix: str, seed: int = 0) -> dict[str, float]:
    """Each match's mean with a 95 % percentile bootstrap CI that resamples whole units (items; users, whose
    interaction rows stay together)."""
    out: dict[str, float] = {}
    units = [str(r.get("unit", r.get("key", i))) for i, r in enumerate(rows)]
    for metric, field in MATCHES.items():
        values = np.array([float(bool(r[field])) for r in rows])
        lo, hi = cluster_bootstrap_ci1(values, units, seed=seed) if rows else (float("nan"), float("nan"))
        out.update({f"{prefix}{metric}": float(values.mean()) if rows else float("nan"),
                    f"{prefix}{metric}_ci_low": lo, f"{prefix}{metric}_ci_high": hi,
                    f"{prefix}{metric}{CI_CLUSTERS}": float(len(set(units)))})
    return out


def aggregate_rows(rows: list[dict], seed: int = 0) -> dict[str, float]:
    done = [r for r in rows if r.get("status", "ok") == "ok" and r.get("correct") is not None]
    out = {"n_samples": float(len(rows)), "n_answered": float(len(done)), "failed": float(len(rows) - len(done))}
    out.update(_block(done, "", seed))
    out["mean_similarity"] = float(np.mean([r["similarity"] for r in done])) if done else float("nan")
    buckets: dict[str, list[dict]] = defaultdict(list)
    for r in done:
        if r.get("pop_bucket"):
            buckets[r["pop_bucket"]].append(r)
    for name, group in sorted(buckets.items()):
        out.update(_block(group, f"pop/{name}/", seed))
        out[f"pop/{name}/n"] = float(len(group))
    return out
