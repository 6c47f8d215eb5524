"""Scores (paper §4.5): per-category G_c and S_c, IG_P, IG_R, IG_F1, IS, HM per user;
the union oracle; mean and median with bootstrap CIs; the IG failure-mode table.

An *interest record* is a dict with ``interest``, ``category_id``, ``verified``,
``correct`` and ``backing`` (plus the failure-mode flags for unverified ones).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Hashable, Iterable

import numpy as np

from llmrec.errors import DataError, read_utf8
from llmrec.pipelines.common.stats import bootstrap_ci

METRICS = ("ig_p", "ig_r", "ig_f1", "is", "hm")
FAILURE_MODES = ("insufficient_imp_pos", "insufficient_exp_pos", "excessive_neg")


def _hm(a: float, b: float) -> float:
    return 2 * a * b / (a + b) if a + b > 0 else 0.0


def category_ratios(interests: list[dict], specificity: str = "mean_ratio") -> dict[Hashable, tuple[float, float]]:
    """``category → (G_c, S_c)``. S_c counts every interest of the category, verified or not (reference);
    ``mean_ratio``: mean of correct/backing (0 when backing is 0); ``pooled``: Σcorrect/Σbacking (eq. 7)."""
    groups: dict[Hashable, list[dict]] = defaultdict(list)
    for rec in interests:
        groups[rec["category_id"]].append(rec)
    out = {}
    for cat, recs in groups.items():
        g = sum(1 for r in recs if r["verified"]) / len(recs)
        if specificity == "pooled":
            backing = sum(r["backing"] for r in recs)
            s = sum(r["correct"] for r in recs) / backing if backing else 0.0
        else:
            s = sum(r["correct"] / r["backing"] for r in recs if r["backing"] > 0) / len(recs)
        out[cat] = (g, s)
    return out


def user_score(interests: list[dict], oracle_count: int, specificity: str = "mean_ratio") -> dict[str, float]:
    """IG_P = ΣG_c/#categories, IG_R = ΣG_c/oracle, IG_F1, IS = mean S_c over categories with G_c > 0, HM."""
    ratios = category_ratios(interests, specificity)
    if not ratios:
        return {m: 0.0 for m in METRICS} | {"n_categories": 0.0, "n_verified_categories": 0.0,
                                             "oracle": float(oracle_count)}
    sum_g = sum(g for g, _ in ratios.values())
    ig_p = sum_g / len(ratios)
    ig_r = sum_g / oracle_count if oracle_count > 0 else 0.0
    ig_f1 = _hm(ig_p, ig_r)
    verified = [s for g, s in ratios.values() if g > 0]
    is_ = sum(verified) / len(verified) if verified else 0.0
    return {"ig_p": ig_p, "ig_r": ig_r, "ig_f1": ig_f1, "is": is_, "hm": _hm(ig_f1, is_),
            "n_categories": float(len(ratios)), "n_verified_categories": float(len(verified)),
            "oracle": float(oracle_count)}


def verified_categories(interests: Iterable[dict]) -> set:
    return {r["category_id"] for r in interests if r["verified"]}


def union_oracle(per_user: Iterable[tuple[Hashable, list[dict]]]) -> dict[Hashable, set]:
    """Eq. 8: per user, the categories with a verified interest in *any* of the given models."""
    out: dict[Hashable, set] = defaultdict(set)
    for key, interests in per_user:
        out[key] |= verified_categories(interests)
    return dict(out)


def load_oracle(path: str | Path) -> tuple[str | None, dict[str, set[int]]]:
    """The bundled format ``{"dataset": ..., "oracle": {user_id: [category_id, ...]}}``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"oracle file not found: {path}")
    try:
        data = json.loads(read_utf8(path))
        oracle = {str(u): {int(c) for c in ids} for u, ids in data["oracle"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"{path}: not an oracle file ({{\"oracle\": {{user_id: [category_id, ...]}}}}): {e}") from e
    return data.get("dataset"), oracle


def summarize(per_user: list[dict], n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
    """``<metric>_mean``/``_median`` (the CLI reports means, the paper medians) with bootstrap CIs."""
    out: dict[str, float] = {"n_users": float(len(per_user))}
    for m in METRICS:
        x = np.asarray([u[m] for u in per_user], dtype=float)
        out[f"{m}_mean"] = float(x.mean()) if x.size else math.nan
        out[f"{m}_median"] = float(np.median(x)) if x.size else math.nan
        lo, hi = bootstrap_ci(x, confidence=confidence, n_resamples=n_boot, seed=seed)
        out[f"{m}_mean_ci_low"], out[f"{m}_mean_ci_high"] = lo, hi
        lo, hi = bootstrap_ci(x, confidence=confidence, n_resamples=n_boot, seed=seed, statistic=np.median)
        out[f"{m}_median_ci_low"], out[f"{m}_median_ci_high"] = lo, hi
        out[f"{m}_mean_ci_clusters"] = out[f"{m}_median_ci_clusters"] = float(x.size)  # users resampled
    return out


def failure_table(interests: list[dict]) -> dict[str, float]:
    """Share of *unverified* interests per failure mode (paper Table 7; modes overlap)."""
    failed = [r for r in interests if not r["verified"]]
    out = {"n_interests": float(len(interests)), "n_unverified": float(len(failed)),
           "verified_rate": (len(interests) - len(failed)) / len(interests) if interests else math.nan}
    for mode in FAILURE_MODES:
        out[f"fail_{mode}"] = sum(1 for r in failed if r.get(mode)) / len(failed) if failed else math.nan
    return out


def score_users(per_user: dict[Hashable, list[dict]], oracle: dict[Hashable, set], supplied: bool,
                specificity: str = "mean_ratio") -> tuple[list[dict], int]:
    """Per-user scores. A supplied oracle skips users it lacks (as the reference does); a union
    oracle scores every user (a user no model verified gets IG_R = 0). Returns (scores, skipped)."""
    scores, skipped = [], 0
    for key, interests in per_user.items():
        if supplied and not oracle.get(key):
            skipped += 1
            continue
        scores.append({"key": key, **user_score(interests, len(oracle.get(key, ())), specificity)})
    return scores, skipped


def metrics(per_user: dict[Hashable, list[dict]], oracle: dict[Hashable, set], supplied: bool,
            specificity: str = "mean_ratio", n_boot: int = 1000, confidence: float = 0.95,
            seed: int = 0) -> dict[str, float]:
    """Everything a run or ``llmrec score`` reports for one model."""
    scores, skipped = score_users(per_user, oracle, supplied, specificity)
    out = summarize(scores, n_boot, confidence, seed)
    out["users_without_oracle"] = float(skipped)
    out.update(failure_table([r for recs in per_user.values() for r in recs]))
    out["oracle_mean_size"] = float(np.mean([s["oracle"] for s in scores])) if scores else math.nan
    return out
