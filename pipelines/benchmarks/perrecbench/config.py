"""PerRecBenchConfig: how groups are built from rating data, and how the model is prompted."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmrec.config import StrictModel
from llmrec.pipelines.protocol import BenchmarkConfig
from llmrec.interactions.config import DataSpec

LEVELS = ("easy", "medium", "hard")
MODES = ("point", "pair", "list")
Level = Literal["easy", "medium", "hard"]
Mode = Literal["point", "pair", "list"]


class GroupConfig(StrictModel):
    """User-group construction (paper §2.1). Defaults are the paper's where it gives one."""

    window_days: float = Field(30.0, gt=0, description="Δt: every user of a group rated the query item within "
                               "[t0, t0 + Δt] (days); the paper gives no value")
    timestamp_unit: Literal["auto", "s", "ms"] = Field(
        "auto", description="unit of the timestamps (auto: ms when the largest timestamp exceeds 1e11)")
    min_history: int = Field(20, ge=0, description="γ: a user is active when MORE than this many of their ratings "
                             "are strictly before the query rating")
    min_gap: float = Field(0.6, ge=0, description="λ: every two users of a group differ by MORE than this in "
                           "relative rating")
    sizes: dict[Level, int] = Field(default_factory=lambda: {"easy": 2, "medium": 3, "hard": 4},
                                    description="users per group at each level")
    groups_per_level: int = Field(200, ge=1, description="N: test groups per level (fewer if the data has fewer)")
    heldout_per_level: int = Field(50, ge=0, description="held-out groups per level (few-shot pool); their query "
                                   "items are disjoint from the test groups'")
    same_items: bool = Field(True, description="one query item pool for all levels, as the reference (the same "
                             "items at every level, different user subsets); False: each level draws its own items")
    mean_mode: Literal["before_query", "reference"] = Field(
        "before_query", description="user mean rating over the history before the query (default) or over the "
        "whole history as the reference does (includes the query rating: leaks the label)")
    seed: int = Field(0, description="seed of group and few-shot sampling")

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {k: n for k, n in v.items() if n < 2}
        if bad:
            raise ValueError(f"group sizes must be at least 2, got {bad}")
        return v


class PromptConfig(StrictModel):
    """Prompt variants (paper Table 2 and Figure 6)."""

    k: int = Field(4, ge=1, le=64, description="BM25-retrieved history items per user (paper: 1, 2, 4, 8, 12, 16)")
    profile: bool = Field(True, description="include the LLM user profile and the most-common/average rating "
                          "lines (False: the 'without profile' variant)")
    shots: int = Field(0, ge=0, le=5, description="few-shot demonstrations (0-5): point from the user's own "
                       "earlier ratings, pair/list from held-out groups")
    cot: bool = Field(False, description="chain-of-thought templates (turns constrained decoding off)")
    samples: int = Field(1, ge=1, le=16, description="self-consistency: completions per prompt; the most common "
                         "raw completion is parsed (reference majority_vote)")
    templates: Literal["reference", "builtin"] = Field(
        "reference", description="reference (default): the reference's own template files (0ours<i>, non-CoT "
        "unless cot) read from <data dir>/<reference_templates>; builtin: this package's wording in templates/ "
        "(adds 'relative to their own usual taste' hints the reference never gives)")
    reference_templates: Path = Field(Path("perrecbench/code"), description="the reference's code/ folder, "
                                      "relative to the data dir (or absolute)")
    template_index: int = Field(0, ge=0, le=3, description="reference template variant 0ours<i> (CoT exists for 0)")
    system_in_user: bool = Field(False, description="prepend the system text to the user message (the reference "
                                 "does this for Gemma models)")
    profile_items: int = Field(30, ge=1, description="most recent history items shown to the profile generator")


class SamplingConfig(StrictModel):
    temperature: float = Field(0.1, ge=0, description="sampling temperature (paper: 0.1)")
    seed: int = Field(0, description="base sampling seed; retry r and sample j use seed + r*samples + j")
    max_tokens: int = Field(800, ge=1, description="point and list answers (reference: 800)")
    pair_max_tokens: int = Field(512, ge=1, description="pair answers (reference: 512)")
    profile_max_tokens: int = Field(400, ge=1, description="profile generation")
    profile_temperature: float = Field(0.0, ge=0, description="profile generation temperature")
    max_attempts: int = Field(5, ge=1, description="calls per prompt until the answer parses (reference "
                              "max_retries=5: five calls in all); still unparsable = missed")
    constrained: bool = Field(False, description="false (default, the reference): free text, re-asked until it "
                              "parses (max_attempts); true (option): ask the engine for constrained output, a JSON "
                              "schema for point/list, the closed choices for pair (never with cot)")


class PerRecBenchConfig(BenchmarkConfig):
    name: Literal["perrecbench"] = "perrecbench"
    data: DataSpec = Field(default_factory=lambda: DataSpec(format="movielens-100k", path=Path("ml-100k")),
                           description="timestamped rating data read by the interaction data layer; relative "
                           "paths resolve against the run's data dir")
    levels: list[Level] = Field(default_factory=lambda: list(LEVELS), min_length=1, description="levels to run")
    modes: list[Mode] = Field(default_factory=lambda: list(MODES), min_length=1, description="ranking modes to run")
    groups: GroupConfig = Field(default_factory=GroupConfig)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    profile_engine: Literal["subject", "judge"] = Field(
        "subject", description="engine that writes user profiles (the paper uses an instruction-tuned LLM)")
    ties: Literal["reference", "aware"] = Field(
        "reference", description="how a prediction that leaves users unordered (equal point scores, a user named "
        "twice in a list, a pair preferred in neither prompt order) is scored: reference (default, the reference "
        "code) breaks the tie by position; aware scores each metric's expected value over every way to break it "
        "(a tied pair of users counts 0). Either way n_tied / tied_share count such groups")

    @field_validator("levels", "modes")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"must be a non-empty list without repeats, got {v}")
        return v

    @model_validator(mode="after")
    def _levels_sized(self) -> "PerRecBenchConfig":
        missing = [lv for lv in self.levels if lv not in self.groups.sizes]
        if missing:
            raise ValueError(f"levels {missing} have no size in groups.sizes {self.groups.sizes}")
        if self.prompt.cot and self.prompt.templates == "reference" and self.prompt.template_index != 0:
            raise ValueError("the reference has chain-of-thought templates only for template_index 0")
        if self.prompt.shots > self.groups.heldout_per_level and {"pair", "list"} & set(self.modes):
            raise ValueError(f"prompt.shots={self.prompt.shots} pair/list demonstrations come from held-out groups; "
                             f"groups.heldout_per_level={self.groups.heldout_per_level} is too few")
        return self
