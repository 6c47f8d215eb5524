"""A memorization row's fields: one catalogue item (or user) asked once."""

from __future__ import annotations

from pydantic import Field

from llmrec.pipelines.record import Payload

TRANSIENT = ("_shots",)
"""Rendering inputs never stored: the shots ([key, line] pairs; their keys are kept in ``shot_ids``)."""


class MemorizationPayload(Payload):
    probe: str = Field(description="item (the title from the item ID), user (the user line from the user ID) or "
                       "interaction (a user's next rating row)")
    catalogue: str
    dataset: str = Field(description="the dataset's name in the prompt")
    sep: str = Field(description="the file's field separator")
    key: str = Field(description="the ID asked: an item's (item probe) or a user's (user, interaction probes)")
    unit: str = Field(description="the resampling unit: the item (item probe) or the user (user, interaction)")
    position: int | None = Field(None, description="interaction probe: the asked row's index in the user's rows")
    gold: str = Field(description="the title the file stores (item), the user's whole line (user), or the asked "
                      "row <user><sep><item> (interaction)")
    fields: str | None = Field(None, description="user probe: the user line's fields, as the prompt names them")
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
