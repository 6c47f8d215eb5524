"""BPRMF: matrix factorisation trained with the Bayesian Personalized Ranking loss.

Rendle et al., "BPR: Bayesian Personalized Ranking from Implicit Feedback" (UAI 2009).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from llmrec.models.base import ModelConfig, Recommender, register_model
from llmrec.models.data import RecData, pairwise_batches


class BPRMFConfig(ModelConfig):
    name: Literal["bprmf"] = Field("bprmf", description="model name")
    embedding_size: int = Field(64, ge=1, description="dimension of user and item embeddings")


@register_model
class BPRMF(Recommender):
    """score(u, i) = <p_u, q_i>; loss = -log σ(score(u, i+) - score(u, i-))."""

    config_cls = BPRMFConfig

    def __init__(self, cfg: BPRMFConfig, data: RecData):
        super().__init__(cfg, data)
        self.user_emb = nn.Embedding(data.n_users, cfg.embedding_size)
        self.item_emb = nn.Embedding(data.n_items, cfg.embedding_size, padding_idx=0)
        nn.init.xavier_normal_(self.user_emb.weight)
        nn.init.xavier_normal_(self.item_emb.weight)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def training_batches(self, data, batch_size, rng):
        return pairwise_batches(data, batch_size, rng)

    def calculate_loss(self, batch) -> torch.Tensor:
        u = self.user_emb(batch["users"])
        pos = (u * self.item_emb(batch["pos"])).sum(-1)
        neg = (u * self.item_emb(batch["neg"][:, 0])).sum(-1)
        return -nn.functional.logsigmoid(pos - neg).mean()

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        return self.user_emb(users) @ self.item_emb.weight.T

    def embeddings(self):
        return self.user_emb.weight.detach(), self.item_emb.weight.detach()
