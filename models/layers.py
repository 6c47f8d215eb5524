"""Pieces shared by the sequence models (GRU4Rec, SASRec)."""

from __future__ import annotations

import torch
from torch import nn


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
