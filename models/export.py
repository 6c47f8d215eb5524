"""Exports of a trained model: per-user top-K lists and user/item embeddings, as parquet."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from llmrec.models.base import Recommender
from llmrec.models.data import RecData
from llmrec.models.evaluation import EvalConfig, EvalResult, evaluate


def topk_frame(data: RecData, result: EvalResult) -> pd.DataFrame:
    """Long frame ``user_id, rank (1-based), item_id, score`` from an ``evaluate(..., keep_topk=K)`` result."""
    if result.topk_items is None:
        raise ValueError("evaluate() was called without keep_topk")
    n_users, k = result.topk_items.shape
    return pd.DataFrame(
        {
            "user_id": np.repeat(result.per_user["user_id"].to_numpy(), k),
            "rank": np.tile(np.arange(1, k + 1), n_users),
            "item_id": data.item_ids[result.topk_items.reshape(-1)],
            "score": result.topk_scores.reshape(-1).astype(np.float64),
        }
    )


def export_topk(
    model: Recommender,
    data: RecData,
    phase: str,
    k: int,
    path: Path,
    cfg: EvalConfig | None = None,
    device: str | torch.device = "cpu",
) -> Path:
    """Write each ``phase`` user's top-``k`` items (history excluded in full mode) to ``path`` (parquet)."""
    result = evaluate(model, data, phase, cfg or EvalConfig(), device, keep_topk=k)
    path.parent.mkdir(parents=True, exist_ok=True)
    topk_frame(data, result).to_parquet(path, index=False)
    return path


def export_embeddings(model: Recommender, data: RecData, directory: Path) -> dict[str, Path]:
    """Write ``user_embeddings.parquet`` (user_id, embedding) and ``item_embeddings.parquet``
    (item_id, embedding; padding row dropped). Empty dict when the model has no embeddings."""
    emb = model.embeddings()
    if emb is None:
        return {}
    users, items = (t.detach().float().cpu().numpy() for t in emb)
    directory.mkdir(parents=True, exist_ok=True)
    out = {
        "user_embeddings": directory / "user_embeddings.parquet",
        "item_embeddings": directory / "item_embeddings.parquet",
    }
    pd.DataFrame({"user_id": data.user_ids, "embedding": list(users)}).to_parquet(out["user_embeddings"], index=False)
    pd.DataFrame({"item_id": data.item_ids[1:], "embedding": list(items[1:])}).to_parquet(
        out["item_embeddings"], index=False
    )
    return out


def candidate_lists(data: RecData, phase: str) -> pd.DataFrame | None:
    """The sampled-mode candidates of ``phase``: ``user_id, positives, negatives`` (lists of item ids),
    exactly the items the evaluator ranks, so an LLM re-ranker can be fed the same ones; None in full mode.
    File format (``candidates_<phase>.parquet``): one row per evaluated user, users in index order."""
    es = data.phase(phase)
    if es.negatives is None:
        return None
    return pd.DataFrame(
        {
            "user_id": data.user_ids[es.users],
            "positives": [list(data.item_ids[p]) for p in es.positives],
            "negatives": [list(data.item_ids[n]) for n in es.negatives],
        }
    )
