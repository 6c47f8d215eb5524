"""A Beyond Utility sample's fields: one user under one prompt strategy, history length and candidate order."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from llmrec.pipelines.common.reask import States
from llmrec.pipelines.record import Payload

TRANSIENT = ("_text", "_profile_text", "_history_titles", "_candidate_titles")
"""Rendering inputs never stored: the prompt paraphrase, the profile prompt, history and candidate titles."""


class BeyondUtilityPayload(Payload):
    user_id: str
    prompt: str = Field(description="the prompt strategy (a setting key)")
    history_shown: str = Field(description="'all' or the number of history items shown (a setting key)")
    order: str = Field(description="candidate order (a setting key)")
    template: str = Field(description="the prompt text used (no_history when no history is shown)")
    paraphrase: int
    profile_paraphrase: int | None = None
    target: int = Field(description="the held-out item (internal id)")
    candidates: list[int] = Field(description="the candidates in the order shown")
    base_candidates: list[int]
    target_title: str | None = Field(None, description="the held-out item's title (for people reading results)")
    candidate_titles: list[str] | None = Field(None, description="the candidates' titles, in the order shown")
    history_len: int
    list_len: int
    user_draw: dict[str, Any] = Field(description="how the user was drawn (statistic, value, group)")
    catalog_key: str = Field(description="the dataset catalog the assets hold for this sample")
    # the profile stage (profile prompts)
    profile: str | None = None
    profile_error: str | None = None
    # the rank stage (re-asked until the list parses) and score
    answers: States | None = None
    compliant: bool | None = None
    # a trained baseline's row (a suite's ranking_baselines): the contract ids it ranked
    ranked: list[int] | None = None
    tied: bool | None = Field(None, description="a trained baseline's row: equal scores (broken by the candidates' "
                              "given order) decided which items made its top list")
