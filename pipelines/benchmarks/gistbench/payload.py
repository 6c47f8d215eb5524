"""A GISTBench sample's fields: one user's engagement history, chunked, through extract → judge →
specificity → taxonomy, then scored per interest."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from llmrec.pipelines.common.reask import States
from llmrec.pipelines.record import Payload

TRANSIENT = ("_chunks", "_pool", "_categories")
"""Rendering inputs never stored: the history chunks, the specificity distractor pool, the taxonomy's
categories (LLM mapper)."""


class GistbenchPayload(Payload):
    dataset: str
    user_id: str
    chunk_size: int = Field(description="engagements per extraction prompt (a setting key)")
    model_label: str
    signals: list[str] = Field(description="the engagement types the dataset has")
    object_name: str
    n_engagements: int
    taxonomy_ref: dict[str, Any] = Field(description="the taxonomy mapper and its cache (shared_taxonomy)")
    data_dir: str = Field(description="the data directory the history was read from (resolved on the driver)")
    # the stages (each re-asked until its answer parses)
    extraction: States | None = Field(None, description="per chunk: the extraction question's state")
    interests: list[dict[str, Any]] | None = Field(None, description="the merged extracted interests")
    judge: States | None = Field(None, description="per interest: the evidence judge's state")
    overlap: States | None = Field(None, description="the specificity overlap question's state")
    specificity: States | None = Field(None, description="per interest: the IS probe's state")
    categories: dict[str, int] | None = Field(None, description="LLM taxonomy mapper: interest → category id")
    # score
    interests_scored: list[dict[str, Any]] | None = None
    n_interests: int | None = None
    n_verified: int | None = None
    n_chunks: int | None = None
    taxonomy_hits: int | None = None
    failed_chunks: int | None = None
