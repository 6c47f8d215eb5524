"""SASRec: causal self-attention over the user's item sequence predicts the next item.

Kang & McAuley, "Self-Attentive Sequential Recommendation" (ICDM 2018). Item and learned
position embeddings, ``n_layers`` transformer blocks with a causal mask; the output at each
position is scored against the (shared) item embeddings.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from llmrec.models.base import Recommender, register_model
from llmrec.models.data import RecData
from llmrec.models.layers import SequenceConfig, SequenceTraining, last_position


class SASRecConfig(SequenceConfig):
    name: Literal["sasrec"] = Field("sasrec", description="model name")
    hidden_size: int = Field(64, ge=1, description="embedding / model dimension")
    n_layers: int = Field(2, ge=1, description="transformer blocks")
    n_heads: int = Field(2, ge=1, description="attention heads (must divide hidden_size)")
    inner_size: int = Field(256, ge=1, description="feed-forward width")
    dropout: float = Field(0.5, ge=0, lt=1, description="dropout on embeddings, attention weights and block outputs")
    initializer_range: float = Field(0.02, gt=0, description="std of the normal initialisation of weights")

    @model_validator(mode="after")
    def _heads(self) -> "SASRecConfig":
        if self.hidden_size % self.n_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must divide hidden_size ({self.hidden_size})")
        return self


@register_model
class SASRec(SequenceTraining, Recommender):
    """score(seq, i) = <F(seq)_t, q_i>, F a causal transformer, t the last position."""

    config_cls = SASRecConfig

    def __init__(self, cfg: SASRecConfig, data: RecData):
        super().__init__(cfg, data)
        self.item_emb = nn.Embedding(data.n_items, cfg.hidden_size, padding_idx=0)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=1e-12)
        self.drop = nn.Dropout(cfg.dropout)
        layer = nn.TransformerEncoderLayer(
            cfg.hidden_size,
            cfg.n_heads,
            cfg.inner_size,
            cfg.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=False,
        )
        # Dropout after attention and after the feed-forward block, none inside it (as SASRec/RecBole).
        layer.dropout = nn.Identity()
        self.encoder = nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)
        causal = torch.triu(torch.full((cfg.max_seq_len, cfg.max_seq_len), float("-inf")), diagonal=1)
        self.register_buffer("causal", causal, persistent=False)
        self._init_weights(cfg.initializer_range)

    def _init_weights(self, std: float) -> None:
        """N(0, std) weights and zero biases for embeddings, projections and linears (BERT-style)."""
        for name, param in self.named_parameters():
            if "norm" in name:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(param)
            else:
                nn.init.normal_(param, std=std)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def _encode(self, seq: torch.Tensor) -> torch.Tensor:
        length = seq.shape[1]
        pos = torch.arange(length, device=seq.device)
        x = self.drop(self.norm(self.item_emb(seq) + self.pos_emb(pos)))
        return self.encoder(x, mask=self.causal[:length, :length], is_causal=True)

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        return last_position(self._encode(seq), seq_len) @ self.item_emb.weight.T
