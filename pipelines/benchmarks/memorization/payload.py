"""A memorization row's fields: one catalogue item asked once."""

from __future__ import annotations

from pydantic import Field

from llmrec.pipelines.record import Payload

TRANSIENT = ("_shots",)
"""Rendering inputs never stored: the shot lines ([id, title] pairs; their ids are kept in ``shot_ids``)."""


class MemorizationPayload(Payload):
    probe: str = Field(description="item (the title from the ID)")
    catalogue: str
    dataset: str = Field(description="the dataset's name in the prompt")
    sep: str = Field(description="the file's field separator")
    item_id: str
    gold: str = Field(description="the title the file stores")
    shot_ids: list[str]
    popularity: int | None = Field(None, description="unique users with an interaction; None: no interaction data")
    pop_rank: int | None = Field(None, description="1 = most popular")
    pop_bucket: str | None = Field(None, description="popularity bucket, e.g. top0-20")
    output: str | None = None
    answer: str | None = None
    similarity: float | None = None
    correct: bool | None = Field(None, description="memorized: similarity above the threshold (the reference's)")
    exact: bool | None = None
    normalised: bool | None = None
