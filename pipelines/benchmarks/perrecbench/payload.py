"""A PerRecBench sample's fields: one group of users who rated a query item, asked in one mode."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmrec.pipelines.common.reask import States
from llmrec.pipelines.record import Payload

TRANSIENT = ("_query", "_users", "_shots", "_templates")
"""Rendering inputs never stored: the query item, the users' histories and retrieved items, the few-shot
examples, the prompt templates."""


class PerRecBenchPayload(Payload):
    group_id: str
    level: str = Field(description="easy / medium / hard (a setting key)")
    mode: Literal["point", "pair", "list"] = Field(description="a setting key")
    size: int = Field(description="users in the group")
    item_id: str = Field(description="the query item")
    window: list[int] = Field(description="the group's time window [t0, t1]")
    user_ids: list[str]
    relative_ratings: list[float] = Field(description="each user's rating minus their average (the gold order)")
    avg_ratings: list[float]
    ratings: list[float]
    item_avg_ratings: list[float]
    # the profile stage (prompt.profile) and the mode's stage (re-asked until each slot parses)
    profiles: dict[str, str] | None = Field(None, description="user key → generated profile")
    answers: States | None = None
    prediction: list[float | None] | None = Field(
        None, description="point: predicted ratings; pair / list: user indices 1..n, most preferred first")
    # score
    ptc: float | None = None
    ptc_rank: float | None = None
    exact_match: float | None = None
    missed: bool | None = None
    ties: bool | None = Field(None, description="the prediction leaves two users unordered (equal point scores, a "
                              "user named twice in a list, a pair preferred in neither prompt order)")
    tied_pairs: list[list[int]] | None = Field(None, description="pair mode: the user pairs (1-based) the model "
                                               "preferred in neither prompt order")
