"""Pieces shared by the sequence models (GRU4Rec, SASRec)."""

from __future__ import annotations

from typing import Callable, Literal

import numpy as np
import torch
from pydantic import Field, model_validator
from torch import nn

from llmrec.models.base import ModelConfig
from llmrec.models.data import (
    PrefixSamples,
    RecData,
    prefix_batches,
    sequence_batches,
    sequence_prefixes,
    sequence_windows,
)


class SequenceConfig(ModelConfig):
    """Fields every next-item sequence model has."""

    max_seq_len: int = Field(50, ge=2, description="most recent items fed to the model")
    loss: Literal["ce", "bce"] = Field(
        "ce", description="ce: softmax over all items; bce: one sampled negative per position"
    )
    train_samples: Literal["prefix", "windows"] = Field(
        "prefix",
        description=(
            "prefix (default, RecBole's rule): every train item after a user's first is its own sample, predicted "
            "from the max_seq_len items before it; windows: a user's targets packed into shared windows "
            "(train_stride), one forward pass and dropout mask per window (docs/baselines.md)"
        ),
    )
    train_stride: int | None = Field(
        1,
        ge=1,
        description=(
            "train_samples: windows only: step between training windows; 1 gives every target its full context; "
            "null = max_seq_len: consecutive windows, ~20x cheaper, lower NDCG (docs/baselines.md)"
        ),
    )

    @model_validator(mode="after")
    def _stride(self) -> "SequenceConfig":
        if self.train_samples == "prefix" and self.train_stride != 1:
            raise ValueError(
                f"train_stride ({self.train_stride}) applies to train_samples: windows; prefix samples have no stride"
            )
        if self.train_stride is not None and self.train_stride > self.max_seq_len:
            raise ValueError(f"train_stride ({self.train_stride}) must not exceed max_seq_len ({self.max_seq_len})")
        return self

    def training_protocol(self) -> dict:
        if self.train_samples == "prefix":
            rule = "one sample per train item after a user's first, predicted from up to max_seq_len items before it"
            return {"train_samples": "prefix", "train_samples_rule": rule + " (RecBole's sequential augmentation)"}
        return {
            "train_samples": "windows",
            "train_stride": self.train_stride,
            "train_samples_rule": "a user's targets packed into windows sharing one forward pass and dropout mask "
            "(deliberate difference from RecBole's per-prefix samples)",
        }


class SequenceTraining:
    """Mixin of the next-item sequence models (before ``Recommender`` in the bases): they score
    from the history sequence, read ``max_seq_len`` from their config, embed items in ``item_emb``,
    map ``seq [B, L]`` to per-position outputs ``[B, L, d]`` in ``_encode`` (causally: position t
    sees items 0..t only) and train on shuffled batches of ``batch_size`` next-item targets, built
    by ``train_samples``: RecBole's prefix samples (``models.data.sequence_prefixes``) or packed
    windows (``models.data.sequence_windows``)."""

    cfg: SequenceConfig
    item_emb: nn.Embedding
    _encode: Callable[[torch.Tensor], torch.Tensor]
    uses_sequence = True
    _samples: PrefixSamples | tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def max_seq_len(self) -> int:
        return self.cfg.max_seq_len

    def training_batches(self, data: RecData, batch_size: int, rng: np.random.Generator):
        if self.cfg.train_samples == "prefix":
            if self._samples is None:
                self._samples = sequence_prefixes(data, self.max_seq_len)
            return prefix_batches(data, self._samples, batch_size, rng)
        if self._samples is None:
            self._samples = sequence_windows(data, self.max_seq_len, self.cfg.train_stride)
        return sequence_batches(data, self.max_seq_len, batch_size, rng, self._samples)

    def calculate_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if batch["target"].dim() == 1:  # prefix samples: the output at each prefix's last item
            hidden = last_outputs(self._encode, batch["seq"], batch["seq_len"])
        else:  # windows: the output at every position that has a target
            hidden = self._encode(batch["seq"])
        return next_item_loss(hidden, self.item_emb.weight, batch, self.cfg.loss)


def last_outputs(
    encode: Callable[[torch.Tensor], torch.Tensor], seq: torch.Tensor, seq_len: torch.Tensor, rows: int = 256
) -> torch.Tensor:
    """``encode(seq)`` at each row's last item ``[B, d]``, encoding rows in groups of ``rows`` of
    similar length, each group cut to its longest row. For a causal ``encode`` (an output never
    depends on later positions) this equals encoding the whole padded batch, with fewer padded
    positions; each row keeps its own dropout mask either way, and the batch is unchanged."""
    order = torch.argsort(seq_len)
    parts = []
    for group in torch.split(order, rows):
        lens = seq_len[group]
        parts.append(last_position(encode(seq[group, : int(lens.max())]), lens))
    return torch.cat(parts)[torch.argsort(order)]


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
