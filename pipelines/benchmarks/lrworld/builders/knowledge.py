"""Knowledgeability (paper §3 (f)–(j)): 4-option questions about the item the user is likely to
interact with next, given the history — leave-one-out: per user, the latest item carrying
the asked field is the positive, the ``history_len`` items before it are the history.

- entity–relation (``brand``) and entity–attribute (``genres``, ``decade``, ``tag``): the
  options are field values; negatives are 3 other values of that field in the catalogue;
- taxonomy (``root`` / ``intermediate`` / ``leaf`` of a category path; intermediate is the
  second level): options are category names of that level;
- text knowledge (``description``) and multimodal (``image_description``, from a user file):
  history and options are texts instead of titles; negatives are other items' texts.
One sample per user at most (users visited in a seeded random order).
"""

from __future__ import annotations

import random

from llmrec.pipelines.benchmarks.lrworld.builders.common import draw, make_sample
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog

FIELD_FACTOR = {"brand": "entity_relation", "genres": "entity_attribute", "decade": "entity_attribute",
                "tag": "entity_attribute", "root": "taxonomy", "intermediate": "taxonomy", "leaf": "taxonomy",
                "description": "text_knowledge", "image_description": "multimodal"}
LEVELS = {"root": 0, "intermediate": 1, "leaf": -1}


def taxonomy_values(catalog: Catalog, level: str) -> dict[str, str]:
    return {i: p[LEVELS[level]] for i, p in catalog.categories.items() if len(p) >= 3}


def build_knowledge(catalog: Catalog, field: str, values: dict[str, str], n: int, seed: int,
                    history_len: int = 5) -> list[dict]:
    """``values``: item → the asked value (an attribute, a category, or a text)."""
    factor = FIELD_FACTOR[field]
    texts = factor in ("text_knowledge", "multimodal")
    users = sorted(catalog.histories)
    random.Random(seed).shuffle(users)
    out = []
    for user in users:
        if len(out) >= n:
            break
        hist = catalog.histories[user]
        pos = next((k for k in range(len(hist) - 1, 0, -1) if hist[k] in values), None)
        if pos is None:
            continue
        item, before = hist[pos], hist[max(0, pos - history_len):pos]
        if texts and not all(i in values for i in before):
            before = [i for i in hist[:pos] if i in values][-history_len:]
        if not before:
            continue
        gold = values[item]
        negs = draw(random.Random(f"{seed}/{field}/{user}"), (v for v in set(values.values()) if v != gold), 3)
        if negs is None:
            continue
        show = values if texts else catalog.items
        out.append(make_sample(
            factor, catalog.name, field, len(out), domain=catalog.domain, user_id=user,
            history=[show.get(i, i) for i in before], history_ids=before,
            gold=gold, gold_id=item, negatives=negs,
            provenance={"builder": "knowledge", "seed": seed, "field": field, "position": pos,
                        "history_len": history_len}))
    return out
