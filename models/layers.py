"""Pieces shared by the sequence models (GRU4Rec, SASRec)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field, model_validator
from torch import nn

from llmrec.models.base import ModelConfig
from llmrec.models.data import RecData, sequence_batches, sequence_windows


class SequenceConfig(ModelConfig):
    """Fields every next-item sequence model has."""

    max_seq_len: int = Field(50, ge=2, description="most recent items fed to the model")
    loss: Literal["ce", "bce"] = Field(
        "ce", description="ce: softmax over all items; bce: one sampled negative per position"
    )
    train_stride: int | None = Field(
        1,
        ge=1,
        description=(
            "step between training windows; 1 (default) gives every target its full context, as RecBole's "
            "prefixes; null = max_seq_len: consecutive windows, ~20x cheaper, lower NDCG (docs/baselines.md)"
        ),
    )

    @model_validator(mode="after")
    def _stride(self) -> "SequenceConfig":
        if self.train_stride is not None and self.train_stride > self.max_seq_len:
            raise ValueError(f"train_stride ({self.train_stride}) must not exceed max_seq_len ({self.max_seq_len})")
        return self


class WindowedTraining:
    """Mixin of the next-item sequence models (before ``Recommender`` in the bases): they score
    from the history sequence, read ``max_seq_len`` from their config, and train on shuffled
    windows of the train histories, ``batch_size`` targets per batch (``models.data.sequence_windows``)."""

    cfg: SequenceConfig
    uses_sequence = True
    _windows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def max_seq_len(self) -> int:
        return self.cfg.max_seq_len

    def training_batches(self, data: RecData, batch_size: int, rng: np.random.Generator):
        if self._windows is None:
            self._windows = sequence_windows(data, self.max_seq_len, self.cfg.train_stride)
        return sequence_batches(data, self.max_seq_len, batch_size, rng, self._windows)


def next_item_loss(
    hidden: torch.Tensor, item_weight: torch.Tensor, batch: dict[str, torch.Tensor], loss: str
) -> torch.Tensor:
    """Next-item loss at every position with a target (``target > 0``), for sequence models."""
    target, valid = batch["target"], batch["target"] > 0
    h = hidden[valid]
    if loss == "ce":
        logits = h @ item_weight.T
        logits[:, 0] = -torch.inf
        return nn.functional.cross_entropy(logits, target[valid])
    pos = (h * item_weight[target[valid]]).sum(-1)
    neg = (h * item_weight[batch["neg"][valid]]).sum(-1)
    return -(nn.functional.logsigmoid(pos) + nn.functional.logsigmoid(-neg)).mean()


def last_position(hidden: torch.Tensor, seq_len: torch.Tensor) -> torch.Tensor:
    """``hidden [B, L, d]`` at position ``seq_len - 1`` (users without history get position 0)."""
    idx = (seq_len - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])
    return hidden.gather(1, idx).squeeze(1)
