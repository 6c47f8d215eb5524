"""One builder per factor; ``build_measures`` runs every builder a catalogue supports and names
the measures it cannot build, with the reason (never silently absent)."""

from __future__ import annotations

from typing import Callable

from llmrec.pipelines.benchmarks.lrworld.builders.association import build_association
from llmrec.pipelines.benchmarks.lrworld.builders.common import FACTORS, measure_name
from llmrec.pipelines.benchmarks.lrworld.builders.knowledge import LEVELS, build_knowledge, taxonomy_values
from llmrec.pipelines.benchmarks.lrworld.builders.memory import build_memory
from llmrec.pipelines.benchmarks.lrworld.builders.neural import Embeddings, build_neural
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog

# attribute fields per factor; a catalogue lacking one reports the measure as not built
ATTRIBUTE_FIELDS = {"entity_relation": ("brand",), "entity_attribute": ("genres", "decade", "tag")}
DOMAIN_FIELDS = {"movie": ("genres", "decade"), "music artist": ("tag",), "product": ("brand",)}


def _cut(texts: dict[str, str] | None, n: int) -> dict[str, str] | None:
    """Texts cut to ``n`` characters (at a word boundary, with an ellipsis)."""
    if not texts:
        return texts
    return {k: v if len(v) <= n else v[:n].rsplit(" ", 1)[0] + " …" for k, v in texts.items()}


def _plan(catalog: Catalog, b, emb: Embeddings | None, images: dict | None) -> list[tuple[str, str, object]]:
    """(factor, field, thunk | reason) for every measure this catalogue's domain has."""
    n, s = b.per_measure, b.seed
    plan: list[tuple[str, str, object]] = [
        ("association_rules", "item", lambda: build_association(catalog, n, s, b.min_support, b.min_confidence,
                                                                b.max_len)),
        ("memory_item_item", "item", lambda: build_memory(catalog, "item", n, s, b.threshold, b.user_items)),
        ("memory_user_user", "user", lambda: build_memory(catalog, "user", n, s, b.threshold, b.user_items)),
    ]
    for direction, field in (("item_users", "user"), ("user_items", "item")):
        thunk = (lambda d=direction: build_neural(catalog, emb, d, n, s, b.clusters, b.per_cluster, b.user_items)) \
            if emb is not None else "no embeddings folder given (source.embeddings)"
        plan.append((f"neural_{direction}", field, thunk))
    for factor, fields in ATTRIBUTE_FIELDS.items():
        for field in fields:
            if field not in DOMAIN_FIELDS.get(catalog.domain, ()):
                continue
            values = catalog.attributes.get(field)
            plan.append((factor, field, (lambda f=field, v=values: build_knowledge(catalog, f, v, n, s, b.history_len))
                         if values else f"the data has no '{field}' values"))
    if catalog.domain == "movie":
        plan.append(("entity_relation", "director", "the data has no cast/director metadata"))
    for level in LEVELS:
        values = taxonomy_values(catalog, level)
        plan.append(("taxonomy", level, (lambda lv=level, v=values: build_knowledge(catalog, lv, v, n, s,
                                                                                     b.history_len))
                     if values else "the data has no category paths (3+ levels)"))
    desc = _cut(catalog.attributes.get("description"), b.max_text_chars)
    images = _cut(images, b.max_text_chars)
    plan.append(("text_knowledge", "description", (lambda: build_knowledge(catalog, "description", desc, n, s,
                                                                             b.history_len))
                 if desc else "the data has no item descriptions"))
    plan.append(("multimodal", "image_description", (lambda: build_knowledge(
        catalog, "image_description", images, n, s, b.history_len))
        if images else "no image-description file given (source.image_descriptions)"))
    return plan


def build_measures(catalog: Catalog, b, emb: Embeddings | None = None, images: dict | None = None,
                   log: Callable[[str], None] | None = None) -> tuple[list[dict], dict[str, str]]:
    """All samples of one catalogue, and ``measure -> reason`` for those not built (or built empty)."""
    samples, not_built = [], {}
    for factor, field, thunk in _plan(catalog, b, emb, images):
        name = measure_name(factor, catalog.name, field)
        if b.factors is not None and factor not in b.factors:
            continue
        if isinstance(thunk, str):
            not_built[name] = thunk
            continue
        got = thunk()
        if log:
            log(f"{name}: {len(got)} samples")
        if got:
            samples += got
        else:
            not_built[name] = "the builder found no valid sample in this data"
    return samples, not_built


__all__ = ["FACTORS", "build_measures", "build_association", "build_memory", "build_neural", "build_knowledge"]
