"""An LRWorld row's fields: a built probe (builders/, samples.py) asked in one variant and position run."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from llmrec.pipelines.record import Payload

TRANSIENT = ("_shots",)
"""Rendering inputs never stored: the few-shot examples of a ``fewshot`` row."""


class LRWorldPayload(Payload):
    # the built probe (builders/common.make_sample, catalog popularity, the noisy-profile draw)
    measure: str
    factor: str
    scale: str
    dataset: str
    field: str
    kind: str = Field(description="mcq (4 options) or hit1 (10 candidates)")
    domain: str
    user_id: str | None = None
    history: list[str] | None = None
    history_ids: list[str] | None = None
    target: str | None = None
    candidates: list[str] = Field(description="the gold first, then the negatives")
    candidate_ids: list[str | None]
    provenance: dict[str, Any] = Field(default_factory=dict, description="how the builder chose the probe")
    gold_pop: str | None = Field(None, description="pop / non-pop of the gold item")
    noise: dict[str, Any] | None = Field(None, description="the noisy-profile replacement: position, item_id, text")
    # the row asked (samples.expand)
    options: list[str]
    gold: str
    gold_pos: int
    base_id: str
    variant: str
    run: int
    # the answer stage and score
    output: str | None = None
    parsed: str | None = None
    correct: bool | None = None
    missed: bool | None = None
    pred_pos: int | None = None
