"""Personalization — neural embeddings (paper §3 (d), (e)).

Input: the embedding export of a model trained by ``llmrec train`` (``models/export.py``):
``<dir>/user_embeddings.parquet`` (user_id, embedding) and ``<dir>/item_embeddings.parquet``
(item_id, embedding) — read as files, so this layer never imports the trainer. For NeuMF the
vectors are the concatenated [GMF ; MLP] embeddings.

Targets are k-means prototypes (faiss, ``clusters`` = 10 as the paper): the members nearest
to each centroid, taken round-robin over clusters (``per_cluster`` each at most). Gold: the
candidate of highest cosine similarity to the target (user → items excludes the user's own
history); negatives: 9 drawn from the candidates below the median similarity.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.lrworld.builders.common import draw, make_sample, profile, user_text
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog


@dataclass(frozen=True)
class Embeddings:
    user_ids: list[str]
    users: np.ndarray
    item_ids: list[str]
    items: np.ndarray


def read_embeddings(directory: Path) -> Embeddings:
    import pandas as pd

    parts = []
    for name, key in (("user_embeddings.parquet", "user_id"), ("item_embeddings.parquet", "item_id")):
        path = Path(directory) / name
        if not path.is_file():
            raise DataError(f"embedding file not found: {path} (write it with `llmrec train` and "
                            "output.export_embeddings: true; see models/export.py)")
        frame = pd.read_parquet(path)
        if key not in frame.columns or "embedding" not in frame.columns:
            raise DataError(f"{path}: needs columns {key}, embedding; has {list(frame.columns)}")
        parts += [frame[key].astype(str).tolist(), np.stack(frame["embedding"].to_numpy()).astype("float32")]
    return Embeddings(*parts)


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


def prototypes(x: np.ndarray, clusters: int, per_cluster: int, seed: int) -> list[int]:
    """Row indices of the members nearest each k-means centroid, round-robin over clusters."""
    import faiss

    k = min(clusters, len(x))
    km = faiss.Kmeans(x.shape[1], k, niter=25, seed=seed, verbose=False)
    km.train(np.ascontiguousarray(x, dtype="float32"))
    dist = ((x[:, None, :] - km.centroids[None, :, :]) ** 2).sum(-1)  # rows × clusters
    assign = dist.argmin(1)
    ranked = [sorted(np.flatnonzero(assign == c), key=lambda r: (dist[r, c], r))[:per_cluster] for c in range(k)]
    out = []
    for depth in range(per_cluster):
        out += [int(r[depth]) for r in ranked if depth < len(r)]
    return out


def build_neural(catalog: Catalog, emb: Embeddings, direction: str, n: int, seed: int, clusters: int = 10,
                 per_cluster: int = 50, user_items: int = 10) -> list[dict]:
    """``direction``: ``item_users`` (target item → matched user) or ``user_items`` (target user → item)."""
    known_u = [k for k, u in enumerate(emb.user_ids) if u in catalog.histories]
    known_i = [k for k, i in enumerate(emb.item_ids) if i in catalog.items]
    users, items = _unit(emb.users[known_u]), _unit(emb.items[known_i])
    uids, iids = [emb.user_ids[k] for k in known_u], [emb.item_ids[k] for k in known_i]
    src, dst, src_ids, dst_ids = (items, users, iids, uids) if direction == "item_users" else (users, items, uids, iids)
    out = []
    for row in prototypes(src, clusters, per_cluster, seed):
        if len(out) >= n:
            break
        target = src_ids[row]
        sims = dst @ src[row]
        allowed = np.ones(len(dst_ids), bool)
        if direction == "user_items":
            seen = set(catalog.histories[target])
            allowed = np.array([i not in seen for i in dst_ids])
        cand = np.flatnonzero(allowed)
        if len(cand) < 10:
            continue
        best = int(cand[np.lexsort((np.array(dst_ids)[cand], -sims[cand]))[0]])
        median = float(np.median(sims[cand]))
        negs = draw(random.Random(f"{seed}/{direction}/{target}"),
                    (dst_ids[k] for k in cand if sims[k] < median and k != best), 9)
        if negs is None:
            continue
        pos = {x: k for k, x in enumerate(dst_ids)}
        if direction == "item_users":
            show = lambda u: user_text(catalog, u, user_items)  # noqa: E731
            ctx = {"target": catalog.items[target]}
        else:
            show = lambda i: catalog.items[i]  # noqa: E731
            hist = profile(catalog, target, user_items)
            ctx = {"user_id": target, "history": [catalog.items.get(i, i) for i in hist], "history_ids": hist}
        out.append(make_sample(
            f"neural_{direction}", catalog.name, "user" if direction == "item_users" else "item", len(out),
            domain=catalog.domain, gold=show(dst_ids[best]), gold_id=dst_ids[best],
            negatives=[show(x) for x in negs], negative_ids=negs, **ctx,
            provenance={"builder": "neural", "seed": seed, "clusters": clusters, "target": target,
                        "gold_similarity": round(float(sims[best]), 6), "median_similarity": round(median, 6),
                        "negative_similarities": [round(float(sims[pos[x]]), 6) for x in negs]}))
    return out
