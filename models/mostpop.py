"""MostPop: rank items by their number of train interactions.

The non-personalised popularity baseline used as the reference of serendipity in
Jiang et al., "Beyond Utility: Evaluating LLM as Recommender" (WWW 2025), A.2.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from llmrec.models.base import ModelConfig, Recommender, register_model
from llmrec.models.data import RecData


class MostPopConfig(ModelConfig):
    name: Literal["mostpop"] = Field("mostpop", description="model name")


@register_model
class MostPop(Recommender):
    """Scores every item by its train popularity, the same for every user."""

    config_cls = MostPopConfig
    trainable = False

    def __init__(self, cfg: MostPopConfig, data: RecData):
        super().__init__(cfg, data)
        self.register_buffer("popularity", torch.zeros(data.n_items))

    def fit(self, data: RecData) -> None:
        """Count train interactions per item."""
        self.popularity = torch.from_numpy(data.item_popularity().astype(np.float32)).to(self.popularity.device)

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        return self.popularity.unsqueeze(0).expand(len(users), -1).clone()
