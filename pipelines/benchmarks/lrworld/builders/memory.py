"""Personalization — memory-based similarity (paper §3 (b), (c)): cosine similarity of one-hot
interaction vectors (an item is the set of users who touched it, a user the set of items).

Given a target item (user), the gold is its most similar other item (user) — ties broken by
id — provided that similarity reaches ``threshold`` (0.01, the paper's); the 9 negatives
are drawn from the items (users) whose similarity to the target is BELOW the threshold,
or, when fewer than 9 are, from the least similar half (recorded as ``negative_pool``).
Targets are visited in a seeded random order until ``n`` samples are made.
"""

from __future__ import annotations

import random

import numpy as np
from scipy import sparse

from llmrec.pipelines.benchmarks.lrworld.builders.common import draw, make_sample, profile, user_text
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog


def onehot(catalog: Catalog) -> tuple[sparse.csr_matrix, list[str], list[str]]:
    """Users × items 0/1 matrix (rows: sorted users, columns: sorted items that occur)."""
    users = sorted(catalog.histories)
    items = sorted({i for h in catalog.histories.values() for i in h})
    col = {i: k for k, i in enumerate(items)}
    rows, cols = [], []
    for r, u in enumerate(users):
        for i in set(catalog.histories[u]):
            rows.append(r)
            cols.append(col[i])
    m = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(users), len(items)))
    return m, users, items


def _normalize_rows(m: sparse.csr_matrix) -> sparse.csr_matrix:
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sparse.diags(1.0 / norms) @ m


def most_similar(unit: sparse.csr_matrix, row: int) -> np.ndarray:
    """Cosine similarity of ``row`` to every row of the row-normalized ``unit`` (itself set to -1)."""
    sims = np.asarray((unit @ unit[row].T).todense()).ravel()
    sims[row] = -1.0
    return sims


def _pick(sims: np.ndarray, names: list[str], threshold: float, rng: random.Random):
    order = np.lexsort((np.array(names), -sims))  # highest similarity, then smallest id
    best = int(order[0])
    if sims[best] < threshold:
        return None
    others = [k for k in range(len(names)) if k != best and sims[k] >= 0]
    below = [names[k] for k in others if sims[k] < threshold]
    pool_name = "below_threshold"
    if len(below) < 9:
        ranked = sorted(others, key=lambda k: (sims[k], names[k]))
        below, pool_name = [names[k] for k in ranked[: len(ranked) // 2]], "least_similar_half"
    negs = draw(rng, below, 9)
    return None if negs is None else (best, negs, pool_name)


def build_memory(catalog: Catalog, what: str, n: int, seed: int, threshold: float = 0.01,
                 user_items: int = 10) -> list[dict]:
    """``what``: ``item`` (item-item) or ``user`` (user-user); users are shown by their latest ``user_items``."""
    m, users, items = onehot(catalog)
    vectors, names = (m.T.tocsr(), items) if what == "item" else (m, users)
    unit = _normalize_rows(vectors)
    factor = "memory_item_item" if what == "item" else "memory_user_user"
    order = list(range(len(names)))
    random.Random(seed).shuffle(order)
    show = (lambda x: catalog.items.get(x, x)) if what == "item" else (lambda x: user_text(catalog, x, user_items))
    idx = {x: k for k, x in enumerate(names)}
    out = []
    for row in order:
        if len(out) >= n:
            break
        sims = most_similar(unit, row)
        picked = _pick(sims, names, threshold, random.Random(f"{seed}/{names[row]}"))
        if picked is None:
            continue
        best, negs, pool = picked
        target = names[row]
        hist = profile(catalog, target, user_items) if what == "user" else None
        out.append(make_sample(
            factor, catalog.name, what, len(out), domain=catalog.domain,
            user_id=target if what == "user" else None,
            target=catalog.items.get(target, target) if what == "item" else None,
            history=[catalog.items.get(i, i) for i in hist] if hist else None, history_ids=hist,
            gold=show(names[best]), gold_id=names[best],
            negatives=[show(x) for x in negs], negative_ids=negs,
            provenance={"builder": "memory", "seed": seed, "threshold": threshold, "target": target,
                        "gold_similarity": round(float(sims[best]), 6), "negative_pool": pool,
                        "negative_similarities": [round(float(sims[idx[x]]), 6) for x in negs]}))
    return out
