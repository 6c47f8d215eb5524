"""Rank GIVEN per-user candidate lists with a trained recommender (the LLM benchmarks' protocol).

Benchmarks such as Beyond Utility show an LLM 20 candidates per user; a baseline must rank the
very same lists to be compared with the same metric code. ``rank_candidates`` scores each
user's candidates with ``full_scores`` (history = the user's train+valid items, i.e. everything
before the test item under leave-one-out) and sorts them by score, ties kept in the given
order. Candidates the model never saw in training score ``-inf`` (they go last).
"""

from __future__ import annotations

import numpy as np
import torch

from llmrec.errors import DataError
from llmrec.models.base import Recommender
from llmrec.models.data import RecData, pad_sequences


def candidate_scores(model: Recommender, data: RecData, users: list[str], candidates: list[list[str]],
                     batch_size: int = 256, device: str | torch.device = "cpu") -> list[np.ndarray]:
    """Per user, the model's score of each given candidate (raw ids; unknown items -> -inf)."""
    uix = {str(u): i for i, u in enumerate(data.user_ids)}
    iix = {str(it): i for i, it in enumerate(data.item_ids) if i > 0}  # index 0 is padding
    missing = [u for u in users if str(u) not in uix]
    if missing:
        raise DataError(f"{len(missing)} users are unknown to the trained model (e.g. {missing[:3]}); "
                        "train it on the same data and filters as the candidates")
    histories = data.histories("test")
    model.eval()
    model.prepare_eval(histories)
    out: list[np.ndarray] = []
    for start in range(0, len(users), batch_size):
        idx = [uix[str(u)] for u in users[start:start + batch_size]]
        seq, seq_len = pad_sequences([histories[i] for i in idx], model.max_seq_len) if model.uses_sequence \
            else (None, None)
        with torch.no_grad():
            scores = model.full_scores(torch.tensor(idx, device=device), None if seq is None else seq.to(device),
                                       None if seq_len is None else seq_len.to(device)).float().cpu().numpy()
        for row, cands in zip(scores, candidates[start:start + batch_size]):
            out.append(np.array([row[iix[str(c)]] if str(c) in iix else -np.inf for c in cands], dtype=np.float64))
    return out


def rank_candidates(model: Recommender, data: RecData, users: list[str], candidates: list[list[str]],
                    batch_size: int = 256, device: str | torch.device = "cpu") -> list[list[str]]:
    """Each user's candidates sorted by the model's score, best first (stable on ties)."""
    scores = candidate_scores(model, data, users, candidates, batch_size, device)
    return [[cands[i] for i in np.argsort(-s, kind="stable")] for cands, s in zip(candidates, scores)]


def round_robin_pool(top_lists: list[list[str]], size: int) -> list[str]:
    """Union of several models' top lists taken in turns (1st of each, then 2nd ...), de-duplicated
    with order kept, cut to ``size`` (the paper's re-ranking candidate pool)."""
    pool: list[str] = []
    seen: set[str] = set()
    for rank in range(max((len(t) for t in top_lists), default=0)):
        for top in top_lists:
            if rank < len(top) and top[rank] not in seen:
                seen.add(top[rank])
                pool.append(top[rank])
                if len(pool) == size:
                    return pool
    return pool
