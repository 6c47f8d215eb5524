"""Top-K metrics (HR, NDCG, MRR, Recall, Precision) in full-ranking and sampled-negative modes.

Definitions per user with positives P (|P| = n) and ranked list R (1-based rank r):

- ``hr@K`` = 1 if any of the top K is in P;   ``precision@K`` = |R_K ∩ P| / K;
- ``recall@K`` = |R_K ∩ P| / n;   ``mrr@K`` = 1 / r of the first hit within K, else 0;
- ``ndcg@K`` = Σ_{r≤K, R_r∈P} 1/log2(r+1)  /  Σ_{r≤min(n,K)} 1/log2(r+1);
- ``mrr`` (no K) = 1 / rank of the first positive over all candidates.

Ties: candidates are shuffled (seeded) before a stable sort on score, so tied items are
ordered at random for every metric and the per-user ``rank`` (RecBole's full sort breaks
ties by item index instead; see docs/baselines.md).

Aggregates are means over evaluated users; the per-user frame keeps every value so later
issues can compute beyond-utility metrics. Metric keys look like ``ndcg@10``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from pydantic import Field, field_validator

from llmrec.config import StrictModel
from llmrec.models.base import Recommender
from llmrec.models.data import RecData, pad_sequences

METRICS = ("hr", "ndcg", "mrr", "recall", "precision")


class EvalConfig(StrictModel):
    """What the evaluator computes."""

    topk: list[int] = Field(default_factory=lambda: [5, 10, 20], description="cut-offs K of every metric")
    batch_size: int = Field(256, ge=1, description="users scored per batch")
    exclude_history: bool | None = Field(
        None, description="full ranking: never rank items the user already has (train, or train+valid); "
        "None = the family default, as RecBole: general models mask, sequential models (SASRec, GRU4Rec) do not"
    )
    seed: int = Field(2020, description="seed of the candidate shuffle that breaks score ties at random "
                      "(full and sampled ranking)")

    @field_validator("topk")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v or any(k < 1 for k in v):
            raise ValueError(f"topk must be a non-empty list of positive integers, got {v}")
        return sorted(set(v))


def metrics_from_hits(hits: np.ndarray, n_pos: np.ndarray, ks: list[int]) -> dict[str, np.ndarray]:
    """Per-user metrics from ``hits [U, Kmax]`` (True where rank r is a positive) and ``n_pos [U]``."""
    hits = np.asarray(hits, dtype=bool)
    n_pos = np.asarray(n_pos, dtype=np.float64)
    discounts = 1.0 / np.log2(np.arange(2, hits.shape[1] + 2))
    first = np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, 0)
    out: dict[str, np.ndarray] = {}
    for k in ks:
        h = hits[:, :k]
        n_hit = h.sum(axis=1)
        ideal = np.cumsum(discounts[:k])[np.minimum(n_pos, k).astype(int) - 1]
        out[f"hr@{k}"] = (n_hit > 0).astype(np.float64)
        out[f"ndcg@{k}"] = (h * discounts[:k]).sum(axis=1) / ideal
        out[f"mrr@{k}"] = np.where((first > 0) & (first <= k), 1.0 / np.maximum(first, 1), 0.0)
        out[f"recall@{k}"] = n_hit / n_pos
        out[f"precision@{k}"] = n_hit / k
    return out


@dataclass
class EvalResult:
    """Mean metrics, the per-user frame and (optionally) each user's top-K item indices/scores."""

    metrics: dict[str, float]
    per_user: pd.DataFrame
    topk_items: np.ndarray | None = None
    topk_scores: np.ndarray | None = None


def history_masked(cfg: EvalConfig, model_cls: type[Recommender] | Recommender) -> bool:
    """``exclude_history`` as set, else the family default: general models mask, sequential ones don't (RecBole)."""
    if cfg.exclude_history is not None:
        return cfg.exclude_history
    return not model_cls.uses_sequence


@torch.no_grad()
def evaluate(
    model: Recommender,
    data: RecData,
    phase: str,
    cfg: EvalConfig,
    device: torch.device | str = "cpu",
    keep_topk: int = 0,
) -> EvalResult:
    """Rank every evaluated user's candidates (all items, or positives + sampled negatives).

    Ties never favour a model: candidates are put in a seeded random order first, and the
    ranking is a stable sort on score, so equal scores are ordered at random (reproducibly);
    top-K, ``rank`` and the un-cut ``mrr`` all follow that one order. Scores, the tie-break
    and the sort stay on ``device``."""
    es = data.phase(phase)
    device = torch.device(device)
    model.eval()
    model.prepare_eval(data.histories(phase))
    kmax = max(max(cfg.topk), keep_topk)
    sampled = es.negatives is not None
    exclude = history_masked(cfg, model)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    hits, ranks, n_pos, keep_i, keep_s = [], [], [], [], []
    for start in range(0, len(es.users), cfg.batch_size):
        sl = slice(start, start + cfg.batch_size)
        users = torch.tensor(es.users[sl], device=device)
        seq, seq_len = pad_sequences(es.history[sl], model.max_seq_len) if model.uses_sequence else (None, None)
        scores = model.full_scores(users, _to(seq, device), _to(seq_len, device)).float().to(device)
        scores[:, 0] = -torch.inf
        if sampled:
            cand, is_pos = _candidates(es.positives[sl], es.negatives[sl], gen)
            cand_scores = scores.gather(1, cand.clamp(min=0)).masked_fill(cand < 0, -torch.inf)
        else:
            pos_mask = _mask(es.positives[sl], data.n_items).to(device)
            if exclude:
                scores = scores.masked_fill(_mask(es.history[sl], data.n_items).to(device) & ~pos_mask, -torch.inf)
            cand = torch.argsort(torch.rand(scores.shape, generator=gen, device=device), dim=1)
            is_pos, cand_scores = pos_mask.gather(1, cand), scores.gather(1, cand)
        k = min(kmax, cand_scores.shape[1])
        top = torch.sort(cand_scores, dim=1, descending=True, stable=True).indices[:, :k]
        hit = is_pos.gather(1, top)
        if k < kmax:
            hit = torch.nn.functional.pad(hit, (0, kmax - k))
        ranks.append(_first_positive_rank(cand_scores, is_pos).cpu().numpy())
        hits.append(hit.cpu().numpy())
        n_pos.append(is_pos.sum(dim=1).cpu().numpy())
        if keep_topk:
            keep_i.append(cand.gather(1, top)[:, :keep_topk].cpu().numpy())
            keep_s.append(cand_scores.gather(1, top)[:, :keep_topk].cpu().numpy())
    return _result(data, es, cfg, hits, ranks, n_pos, keep_i, keep_s)


def _first_positive_rank(scores: torch.Tensor, is_pos: torch.Tensor) -> torch.Tensor:
    """1-based rank of the first positive in the (score desc, column asc) order the top-K uses."""
    best = scores.masked_fill(~is_pos, -torch.inf).max(dim=1).values[:, None]
    tied = scores == best
    first = (is_pos & tied).int().argmax(dim=1, keepdim=True)
    earlier = torch.arange(scores.shape[1], device=scores.device)[None, :] < first
    return (scores > best).sum(dim=1) + (tied & earlier).sum(dim=1) + 1


def _result(data, es, cfg, hits, ranks, n_pos, keep_i, keep_s) -> EvalResult:
    hits_a = np.concatenate(hits) if hits else np.zeros((0, max(cfg.topk)), bool)
    npos = np.concatenate(n_pos) if n_pos else np.zeros(0)
    per = metrics_from_hits(hits_a, npos, cfg.topk) if len(npos) else {}
    frame = pd.DataFrame(
        {"user_id": data.user_ids[es.users], "n_pos": npos.astype(int), "history_len": [len(h) for h in es.history]}
    )
    rank = np.concatenate(ranks) if ranks else np.zeros(0)
    frame["rank"] = rank
    per["mrr"] = 1.0 / np.maximum(rank, 1)
    for key, values in per.items():
        frame[key] = values
    metrics = {key: float(np.mean(v)) if len(v) else 0.0 for key, v in per.items()}
    ti = np.concatenate(keep_i) if keep_i else None
    ts = np.concatenate(keep_s) if keep_s else None
    return EvalResult(metrics, frame, ti, ts)


def _mask(rows: list[np.ndarray], n_items: int) -> torch.Tensor:
    mask = torch.zeros(len(rows), n_items, dtype=torch.bool)
    r = np.repeat(np.arange(len(rows)), [len(x) for x in rows])
    if len(r):
        mask[torch.from_numpy(r), torch.from_numpy(np.concatenate(rows))] = True
    return mask


def _candidates(pos: list[np.ndarray], neg: np.ndarray, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Positives + negatives per user, padded with -1, columns shuffled per user (fair ties), on ``gen``'s device."""
    width = max(len(p) for p in pos) + neg.shape[1]
    cand = torch.full((len(pos), width), -1, dtype=torch.long)
    is_pos = torch.zeros((len(pos), width), dtype=torch.bool)
    for r, p in enumerate(pos):
        cand[r, : len(p)] = torch.tensor(p)
        is_pos[r, : len(p)] = True
        cand[r, len(p) : len(p) + neg.shape[1]] = torch.tensor(neg[r])
    cand, is_pos = cand.to(gen.device), is_pos.to(gen.device)
    perm = torch.argsort(torch.rand(cand.shape, generator=gen, device=gen.device), dim=1)
    return cand.gather(1, perm), is_pos.gather(1, perm)


def _to(t: torch.Tensor | None, device) -> torch.Tensor | None:
    return None if t is None else t.to(device)
