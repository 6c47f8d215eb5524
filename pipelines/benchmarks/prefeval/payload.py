"""A PrefEval sample's fields (the runner adds its own: ``sample_id``, ``status``, ``outputs``, ...)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmrec.pipelines.record import Payload

TRANSIENT = ("_preference", "_layout", "_statements")
"""Rendering inputs from build_samples, never stored: the preference turns, the conversation layout, the
extra / conflicting statements."""


class PrefEvalPayload(Payload):
    # the setting (build_samples)
    task: Literal["mcq", "gen"]
    topic: str
    form: str = Field(description="explicit / implicit_choice / implicit_persona")
    task_id: int = Field(description="the preference's index in its topic file")
    question: str
    preference: str
    options: list[str] | None = Field(None, description="MCQ: the four options, shuffled")
    gold: str | None = Field(None, description="MCQ: the right letter")
    turns: int = Field(description="inter-turn exchanges in the conversation")
    method: str
    position: str = Field(description="where the preference sits in the conversation")
    extra_prefs: int
    conflict: bool
    # what the subject stages write
    pref_reply: str | None = Field(None, description="the model's reply to an explicit preference turn")
    statement_replies: dict[str, str] | None = Field(None, description="replies to extra / conflicting statements")
    initial_output: str | None = Field(None, description="self-critic: the first answer")
    critique: str | None = None
    output: str | None = Field(None, description="the answer scored")
    rag_retrieved: list[int] | None = Field(None, description="RAG: positions of the retrieved history messages")
    rag_pref_hit: bool | None = Field(None, description="RAG: a preference message was retrieved")
    dropped_pairs: int | None = Field(None, description="truncation drop_oldest: inter-turn pairs dropped")
    # the judge stages (generation)
    judge_acknowledge: str | None = None
    judge_violate: str | None = None
    judge_helpful: str | None = None
    judge_hallucinate: str | None = None
    # score: MCQ
    prediction: str | None = None
    missed: bool | None = None
    correct: bool | None = None
    # score: generation (the judge's verdicts and the reference's error types)
    judge_answers: dict[str, str | None] | None = None
    extracted_preference: str | None = None
    judge_failed: bool | None = None
    acknowledged: bool | None = None
    hallucinated: bool | None = None
    violated: bool | None = None
    unhelpful: bool | None = None
    inconsistent_violation: bool | None = None
    hallucinated_violation: bool | None = None
    unaware_violation: bool | None = None
