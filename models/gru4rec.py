"""GRU4Rec: a GRU over the user's item sequence predicts the next item.

Hidasi et al., "Session-based Recommendations with Recurrent Neural Networks" (ICLR 2016),
in the RecBole/ReChorus form: item embedding -> dropout -> GRU -> linear to embedding
space, scored against the item embeddings; trained on RecBole's prefix samples by default
(``train_samples``, ``models.layers.SequenceTraining``).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from llmrec.models.base import Recommender, register_model
from llmrec.models.data import RecData
from llmrec.models.layers import SequenceConfig, SequenceTraining, last_position


class GRU4RecConfig(SequenceConfig):
    name: Literal["gru4rec"] = Field("gru4rec", description="model name")
    embedding_size: int = Field(64, ge=1, description="item embedding dimension")
    hidden_size: int = Field(128, ge=1, description="GRU hidden size")
    num_layers: int = Field(1, ge=1, description="stacked GRU layers")
    dropout: float = Field(0.3, ge=0, lt=1, description="dropout on the input embeddings")


@register_model
class GRU4Rec(SequenceTraining, Recommender):
    """score(seq, i) = <W h_t, q_i> with h_t the GRU state after the last item."""

    config_cls = GRU4RecConfig

    def __init__(self, cfg: GRU4RecConfig, data: RecData):
        super().__init__(cfg, data)
        self.item_emb = nn.Embedding(data.n_items, cfg.embedding_size, padding_idx=0)
        self.drop = nn.Dropout(cfg.dropout)
        self.gru = nn.GRU(cfg.embedding_size, cfg.hidden_size, cfg.num_layers, batch_first=True, bias=False)
        self.out = nn.Linear(cfg.hidden_size, cfg.embedding_size)
        # RecBole's GRU4Rec._init_weights: Xavier-normal embeddings, Xavier-uniform first-layer GRU weights
        nn.init.xavier_normal_(self.item_emb.weight)
        nn.init.xavier_uniform_(self.gru.weight_hh_l0)
        nn.init.xavier_uniform_(self.gru.weight_ih_l0)

    def _encode(self, seq: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.gru(self.drop(self.item_emb(seq)))
        return self.out(hidden)

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        return last_position(self._encode(seq), seq_len) @ self.item_emb.weight.T

    def embeddings(self):
        return None
