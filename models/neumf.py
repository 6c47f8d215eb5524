"""NeuMF: generalized matrix factorisation (GMF) fused with an MLP over user/item embeddings.

He et al., "Neural Collaborative Filtering" (WWW 2017). Trained point-wise with binary
cross-entropy on each positive and ``num_negatives`` sampled negatives; ``train.batch_size``
counts examples, so a batch holds ``batch_size / (1 + num_negatives)`` positives.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from llmrec.models.base import ModelConfig, Recommender, register_model
from llmrec.models.data import RecData, pairwise_batches

SCORE_ELEMENTS = 1 << 24  # full scoring: at most this many MLP input values per item chunk (64 MiB of float32)


class NeuMFConfig(ModelConfig):
    name: Literal["neumf"] = Field("neumf", description="model name")
    mf_embedding_size: int = Field(64, ge=1, description="GMF embedding dimension")
    mlp_embedding_size: int = Field(64, ge=1, description="MLP embedding dimension")
    mlp_hidden_size: list[int] = Field(default_factory=lambda: [128, 64], description="MLP layer widths")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout between MLP layers")
    num_negatives: int = Field(1, ge=1, description="sampled negatives per positive")


@register_model
class NeuMF(Recommender):
    """logit(u, i) = h^T [p_u ⊙ q_i ; MLP([p'_u ; q'_i])]."""

    config_cls = NeuMFConfig

    def __init__(self, cfg: NeuMFConfig, data: RecData):
        super().__init__(cfg, data)
        self.user_mf = nn.Embedding(data.n_users, cfg.mf_embedding_size)
        self.item_mf = nn.Embedding(data.n_items, cfg.mf_embedding_size, padding_idx=0)
        self.user_mlp = nn.Embedding(data.n_users, cfg.mlp_embedding_size)
        self.item_mlp = nn.Embedding(data.n_items, cfg.mlp_embedding_size, padding_idx=0)
        layers: list[nn.Module] = []
        width = 2 * cfg.mlp_embedding_size
        for size in cfg.mlp_hidden_size:
            layers += [nn.Dropout(cfg.dropout), nn.Linear(width, size), nn.ReLU()]
            width = size
        self.mlp = nn.Sequential(*layers)
        self.predict = nn.Linear(cfg.mf_embedding_size + width, 1)
        for emb in (self.user_mf, self.item_mf, self.user_mlp, self.item_mlp):
            nn.init.normal_(emb.weight, std=0.01)

    def _logits(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Logits for ``users [B]`` x ``items [B, C]`` -> ``[B, C]``."""
        c = items.shape[1]
        mf = self.user_mf(users).unsqueeze(1) * self.item_mf(items)
        u = self.user_mlp(users).unsqueeze(1).expand(-1, c, -1)
        mlp = self.mlp(torch.cat([u, self.item_mlp(items)], dim=-1))
        return self.predict(torch.cat([mf, mlp], dim=-1)).squeeze(-1)

    def training_batches(self, data, batch_size, rng):
        # Point-wise: a batch of ``batch_size`` examples holds positives and their negatives (as RecBole).
        return pairwise_batches(data, max(1, batch_size // (1 + self.cfg.num_negatives)), rng, self.cfg.num_negatives)

    def calculate_loss(self, batch) -> torch.Tensor:
        items = torch.cat([batch["pos"].unsqueeze(1), batch["neg"]], dim=1)
        labels = torch.zeros_like(items, dtype=torch.float32)
        labels[:, 0] = 1.0
        return nn.functional.binary_cross_entropy_with_logits(self._logits(batch["users"], items), labels)

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        """Scores in item chunks: the MLP input of one chunk is ``[B, chunk, 2d]``, never ``[B, n_items, 2d]``."""
        out = torch.empty(len(users), self.n_items, device=users.device)
        chunk = max(1, SCORE_ELEMENTS // max(1, len(users) * 2 * self.cfg.mlp_embedding_size))
        for start in range(0, self.n_items, chunk):
            items = torch.arange(start, min(start + chunk, self.n_items), device=users.device)
            out[:, start : start + len(items)] = self._logits(users, items.unsqueeze(0).expand(len(users), -1))
        return out

    def embeddings(self):
        """Concatenated [GMF ; MLP] embeddings of users and items."""
        user = torch.cat([self.user_mf.weight, self.user_mlp.weight], dim=1).detach()
        item = torch.cat([self.item_mf.weight, self.item_mlp.weight], dim=1).detach()
        return user, item
