"""Tiny synthetic data with structure a model can learn: two user groups, two item clusters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from llmrec.models.data import encode
from llmrec.interactions import CandidateConfig, SplitConfig, split_interactions
from llmrec.interactions.schema import canonical_interactions


def clustered_interactions(n_users: int = 24, n_items: int = 30, per_user: int = 10, seed: int = 0) -> pd.DataFrame:
    """Even users pick mostly from items 0..14, odd users from 15..29; titles share cluster words."""
    rng = np.random.default_rng(seed)
    rows = []
    half = n_items // 2
    for u in range(n_users):
        pool = np.arange(half) if u % 2 == 0 else np.arange(half, n_items)
        for t, i in enumerate(rng.choice(pool, size=per_user, replace=False)):
            rows.append((f"u{u}", f"i{i}", 1.0, t))
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    df.index = range(1, len(df) + 1)
    return canonical_interactions(df, "synthetic")


def titles(n_items: int = 30) -> dict[str, str]:
    return {
        f"i{i}": ("space robot saga " if i < n_items // 2 else "love story drama ") + f"part{i}" for i in range(n_items)
    }


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """The test machine's cores are shared: two torch threads contend and run ~10x slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture()
def tiny_split():
    return split_interactions(clustered_interactions(), SplitConfig(protocol="loo"))


@pytest.fixture()
def tiny_data(tiny_split):
    torch.manual_seed(0)
    return encode(tiny_split, titles())


@pytest.fixture()
def tiny_sampled(tiny_split):
    return encode(tiny_split, titles(), CandidateConfig(mode="sampled", num_negatives=5, seed=1))
