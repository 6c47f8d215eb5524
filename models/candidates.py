"""Rank GIVEN per-user candidate lists with a trained recommender (the LLM benchmarks' protocol).

Benchmarks such as Beyond Utility show an LLM 20 candidates per user; a baseline must rank the
very same lists to be compared with the same metric code. ``rank_candidates`` scores each
user's candidates with ``full_scores`` (history = the user's train+valid items, i.e. everything
before the test item under leave-one-out) and sorts them by score, ties kept in the given
order. Candidates the model never saw in training score ``-inf`` (they go last). Each ranked list carries its
scores, so the rows it becomes can say when a tie, not the model, decided the top of the list (``tied_within``:
MostPop's equal counts, BM25's zero scores).
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


class Ranked(list):
    """One user's candidates, best first (a plain list of ids), with ``scores``: the model's score of each, in the
    same order, so a reader can tell which positions were decided by a tie (``tied_within``)."""

    scores: tuple[float, ...] = ()


def tied_within(ranked, k: int) -> bool | None:
    """True when a tie decides the top ``k`` of ``ranked`` (two candidates of equal score, one of them among the
    first k: their order, or which of them makes the cut, is the candidates' given order, not the model's);
    None when ``ranked`` carries no scores (``Ranked``)."""
    scores = getattr(ranked, "scores", None)
    if not scores:
        return None
    return any(scores[i] == scores[i + 1] for i in range(min(k, len(scores) - 1)))


def rank_candidates(model: Recommender, data: RecData, users: list[str], candidates: list[list[str]],
                    batch_size: int = 256, device: str | torch.device = "cpu") -> list[Ranked]:
    """Each user's candidates sorted by the model's score, best first (stable on ties: the given order), as
    ``Ranked`` lists carrying their scores."""
    scores = candidate_scores(model, data, users, candidates, batch_size, device)
    out = []
    for cands, s in zip(candidates, scores):
        order = np.argsort(-s, kind="stable")
        ranked = Ranked(cands[i] for i in order)
        ranked.scores = tuple(float(s[i]) for i in order)
        out.append(ranked)
    return out


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
