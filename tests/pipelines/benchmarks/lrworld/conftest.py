"""Tiny hand-made catalogues whose ground truth is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from llmrec.pipelines.benchmarks.lrworld.builders.neural import Embeddings
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog


@pytest.fixture
def rule_catalog() -> Catalog:
    """Users 0-9 hold {a, b}: the rule a -> b (confidence 1); users 10-19 hold {x_k, y_k}."""
    hist = {f"u{k:02d}": ["a", "b"] for k in range(10)}
    hist.update({f"u{10 + k:02d}": [f"x{k}", f"y{k}"] for k in range(10)})
    items = {i: f"Item {i}" for h in hist.values() for i in h}
    return Catalog("toy", "movie", items, hist)


@pytest.fixture
def sim_catalog() -> Catalog:
    """Item A and B have the same three users (cosine 1); C shares one user with A;
    f0..f11 belong to users who never touched A (cosine 0)."""
    hist = {"u1": ["A", "B", "C"], "u2": ["A", "B"], "u3": ["A", "B"]}
    for k in range(12):
        hist[f"v{k:02d}"] = [f"f{k}", f"f{(k + 1) % 12}"]
    items = {i: f"Title {i}" for h in hist.values() for i in h}
    genres = {i: g for i, g in zip(sorted(items), ["Drama", "Comedy", "Horror", "Action", "Western", "War"] * 5)}
    return Catalog("toy", "movie", items, hist, {"genres": genres, "decade": {i: "1990s" for i in items}})


@pytest.fixture
def embedding_fixture() -> tuple[Catalog, Embeddings]:
    """12 users on the unit circle at distinct angles; item i points exactly at user i."""
    angles = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    vec = np.stack([np.cos(angles), np.sin(angles)], 1).astype("float32")
    users = [f"u{k:02d}" for k in range(12)]
    items = [f"i{k:02d}" for k in range(12)]
    hist = {u: [items[(k + 6) % 12]] for k, u in enumerate(users)}  # each user saw the opposite item
    catalog = Catalog("toy", "movie", {i: f"Movie {i}" for i in items}, hist)
    return catalog, Embeddings(users, vec.copy(), items, vec.copy())
