"""Scored rows → metrics.

Over the answered items (a failed engine call is counted in ``failed``, not as a miss):
``coverage`` (memorized: the reference's fuzzy match), ``coverage_exact``, ``coverage_normalised``, each with a
95 % bootstrap CI over items (``_ci_low`` / ``_ci_high``; ``_ci_clusters``: the items resampled, each item its own
cluster); ``mean_similarity``; ``n_samples`` (items asked), ``n_answered``, ``failed``; per popularity bucket ``pop/<bucket>/coverage`` (+ CI,
``/coverage_exact``, ``/coverage_normalised``, ``/n``). Without interaction data there are no buckets.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from llmrec.pipelines.common.stats import mean_with_ci

MATCHES = {"coverage": "correct", "coverage_exact": "exact", "coverage_normalised": "normalised"}


def _block(rows: list[dict], prefix: str, seed: int = 0) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric, field in MATCHES.items():
        out.update(mean_with_ci([float(bool(r[field])) for r in rows], f"{prefix}{metric}", seed=seed))
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
