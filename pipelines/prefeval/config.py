"""PrefEvalConfig: which slice of PrefEval to run and how."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from llmrec.config import StrictModel
from pipelines.benchmark import BenchmarkConfig

TOPICS = (
    "education_learning_styles", "education_resources", "entertain_games", "entertain_music_book",
    "entertain_shows", "entertain_sports", "lifestyle_beauty", "lifestyle_dietary", "lifestyle_fit",
    "lifestyle_health", "pet_ownership", "professional_work_location_style", "shop_fashion", "shop_home",
    "shop_motors", "shop_technology", "travel_activities", "travel_hotel", "travel_restaurant",
    "travel_transportation",
)
FORMS = ("explicit", "choice", "persona")
Method = Literal["zero-shot", "reminder"]


class PrefEvalTemplates(StrictModel):
    """Benchmark prompt texts. Each is a file; None = the project's default in templates/."""

    mcq_question: Path | None = Field(None, description="MCQ question suffix; placeholders {question} {options} {reminder}")
    reminder: Path | None = Field(None, description="reminder sentence appended to the question")


class PrefEvalConfig(BenchmarkConfig):
    name: Literal["prefeval"] = "prefeval"
    task: Literal["mcq"] = Field("mcq", description="mcq: the classification task")
    topics: list[str] = Field(default_factory=lambda: list(TOPICS), description="topics to run (default: all 20)")
    forms: list[Literal["explicit", "choice", "persona"]] = Field(
        default_factory=lambda: ["explicit"], description="preference forms: explicit, choice (implicit choice-based), persona (implicit persona-driven)")
    turns: list[int] = Field(default_factory=lambda: [8], description="inter-turn pairs between preference and question (0..298; leaderboard 10/300 turns = 8/298)")
    methods: list[Method] = Field(default_factory=lambda: ["zero-shot"], description="zero-shot and/or reminder")
    per_topic: int | None = Field(None, ge=1, description="first N preference/question pairs per topic (None = all)")
    seed: int = Field(41, description="option-shuffle seed (per sample, stable across slices)")
    system_prompt: str | None = Field("You are a helpful assistant.", description="system message (None: none)")
    pref_reply_max_tokens: int = Field(300, ge=1, description="tokens for the model's live reply to an explicit preference")
    answer_max_tokens: int = Field(16, ge=1, description="tokens for the MCQ answer")
    constrain_choice: bool = Field(True, description="ask the engine to emit exactly one <choice>X</choice> (grammar/structured output)")
    templates: PrefEvalTemplates = Field(default_factory=PrefEvalTemplates)

    @field_validator("topics")
    @classmethod
    def _topics(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if t not in TOPICS]
        if bad:
            raise ValueError(f"unknown topic(s) {bad}; allowed: {', '.join(TOPICS)}")
        return v

    @field_validator("turns")
    @classmethod
    def _turns(cls, v: list[int]) -> list[int]:
        bad = [t for t in v if not 0 <= t <= 298]
        if bad:
            raise ValueError(f"turns must be within 0..298 (316 inter-turn pairs exist), got {bad}")
        return v
