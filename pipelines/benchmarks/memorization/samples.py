"""Catalogue → probe rows: the items asked (all, or a seeded draw kept in file order), each with its shots and its
popularity bucket (computed on the whole catalogue's ranking, so a slice keeps the full catalogue's buckets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmrec.pipelines.benchmarks.memorization import catalogues
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig


def folder(cfg: MemorizationConfig, data_dir: Path | None) -> Path:
    rel = cfg.path or Path(catalogues.FOLDERS[cfg.catalogue])
    return rel if rel.is_absolute() or data_dir is None else Path(data_dir) / rel


def build(cfg: MemorizationConfig, cat: catalogues.Catalogue) -> list[dict]:
    ids = list(cat.items["item_id"])
    titles = dict(zip(cat.items["item_id"], cat.items["title"]))
    picked = range(len(ids))
    if cfg.items is not None and cfg.items < len(ids):
        picked = sorted(np.random.default_rng(cfg.seed).choice(len(ids), size=cfg.items, replace=False).tolist())
    ranks = catalogues.popularity_ranks(cat.popularity, ids) if cat.popularity is not None else {}
    rows = []
    for k in picked:
        item = ids[k]
        shots = [i for i in ids if i != item][: cfg.shots]
        rank = ranks.get(item)
        rows.append({"sample_id": f"{cat.name}/item/{item}", "probe": "item", "catalogue": cat.name,
                     "dataset": cat.dataset, "sep": cat.sep, "item_id": item, "gold": titles[item],
                     "shot_ids": shots, "_shots": [[i, titles[i]] for i in shots],
                     "popularity": cat.popularity.get(item, 0) if cat.popularity is not None else None,
                     "pop_rank": rank,
                     "pop_bucket": catalogues.bucket_of(rank, len(ranks), cfg.popularity_buckets)})
    return rows
