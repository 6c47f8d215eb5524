"""What every builder shares: the factor table, the sample record, negative drawing.

A built sample stores its candidates with the gold first (``candidates[0]``); the order a
model sees is drawn at run time from a per-sample stable seed (``samples.expand``), so one
sample file serves the five position-bias runs.
"""

from __future__ import annotations

import random
from typing import Iterable

from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog

# factor -> (scale, question kind: hit1 = HitRate@1 over 10, mcq = accuracy over 4)
FACTORS: dict[str, tuple[str, str]] = {
    "association_rules": ("association", "hit1"),
    "memory_item_item": ("personalization", "hit1"),
    "memory_user_user": ("personalization", "hit1"),
    "neural_item_users": ("personalization", "hit1"),
    "neural_user_items": ("personalization", "hit1"),
    "entity_relation": ("knowledgeability", "mcq"),
    "entity_attribute": ("knowledgeability", "mcq"),
    "taxonomy": ("knowledgeability", "mcq"),
    "text_knowledge": ("knowledgeability", "mcq"),
    "multimodal": ("knowledgeability", "mcq"),
}
N_OPTIONS = {"hit1": 10, "mcq": 4}
SCHEMA_VERSION = 1


def measure_name(factor: str, dataset: str, field: str) -> str:
    """``factor/dataset/field``: one named task, as a row of the paper's tables."""
    return f"{factor}/{dataset}/{field}"


def profile(catalog: Catalog, user: str, n: int) -> list[str]:
    """The ``n`` items that describe a user: the latest (time-ordered data) or the heaviest (LastFM play counts)."""
    hist = catalog.histories[user]
    return hist[-n:] if catalog.ordered else hist[:n]


def user_text(catalog: Catalog, user: str, n: int) -> str:
    """A user as the LLM sees them: ``profile`` items (no id: ids carry no meaning to a model)."""
    return "; ".join(catalog.items.get(i, i) for i in profile(catalog, user, n))


def draw(rng: random.Random, pool: Iterable[str], k: int) -> list[str] | None:
    """``k`` distinct elements of ``pool`` (sorted first, so the draw depends on the seed only), or None."""
    pool = sorted(set(pool))
    return rng.sample(pool, k) if len(pool) >= k else None


def make_sample(factor: str, dataset: str, field: str, index: int, *, gold: str, negatives: list[str],
                gold_id: str | None = None, negative_ids: list[str] | None = None, domain: str = "item",
                user_id: str | None = None, history: list[str] | None = None,
                history_ids: list[str] | None = None, target: str | None = None,
                provenance: dict | None = None) -> dict:
    scale, kind = FACTORS[factor]
    measure = measure_name(factor, dataset, field)
    if len(negatives) != N_OPTIONS[kind] - 1 or gold in negatives:
        raise ValueError(f"{measure} sample {index}: need {N_OPTIONS[kind] - 1} negatives distinct from the gold")
    return {
        "sample_id": f"{measure}#{index}",
        "measure": measure, "factor": factor, "scale": scale, "dataset": dataset, "field": field,
        "kind": kind, "domain": domain, "user_id": user_id,
        "history": history, "history_ids": history_ids, "target": target,
        "candidates": [gold, *negatives],
        "candidate_ids": [gold_id, *(negative_ids or [None] * len(negatives))],
        "provenance": provenance or {},
    }
