"""BeyondUtilityConfig: which users, candidates, prompts and dimensions a run covers.

Every deliberate difference from the reference code (EvaLLMasRecommender) is a named option
here, listed under "Known differences" in README.md and recorded in the MLflow ``protocol`` tag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmrec.config import StrictModel
from llmrec.interactions.config import DataSpec, FilterConfig
from llmrec.pipelines.protocol import BenchmarkConfig

PROMPTS = ("history", "candidates_first", "profile", "profile_history", "llmrank", "in_context")
Prompt = Literal["history", "candidates_first", "profile", "profile_history", "llmrank", "in_context"]
Order = Literal["shuffled", "target_first"]
PAPER_HISTORY_LENS = (0, 1, 2, 3, 4, 5, 10, 15, 20)


class UserSampling(StrictModel):
    """Which test users are evaluated (paper: n users whose metric distribution matches the full set)."""

    n_users: int | None = Field(200, ge=1, description="users to evaluate (None: every test user)")
    method: Literal["ks", "random", "first"] = Field(
        "ks", description="ks: resample until a two-sample K-S test (scipy.stats.ks_2samp) of the per-user "
        "statistic against all test users has p > alpha (the paper); random: one seeded draw; first: lowest ids")
    statistic: Literal["history_len", "file"] = Field(
        "history_len", description="per-user values the K-S test compares: each user's history length, or a "
        "chosen baseline's per-user metric read from values_path")
    values_path: Path | None = Field(None, description="statistic=file: JSONL {user_id, <values_column>} or a "
                                     "parquet table, e.g. a `llmrec train` run's per_user_test.parquet")
    values_column: str = Field("value", description="statistic=file: the column holding the metric (e.g. ndcg@10)")
    alpha: float = Field(0.05, gt=0, lt=1, description="accept a draw when the K-S p-value exceeds this")
    max_draws: int = Field(1000, ge=1, description="give up (error) after this many draws")
    seed: int = Field(0, description="seed of the first draw; draw i uses seed + i (the accepted one is recorded)")

    @model_validator(mode="after")
    def _file(self) -> "UserSampling":
        if self.statistic == "file" and self.values_path is None:
            raise ValueError("statistic: file needs values_path")
        return self


class QueryConfig(StrictModel):
    """Model calls: the reference asks at temperature 0, then re-asks non-compliant answers hotter."""

    max_tokens: int = Field(400, ge=1, description="completion cap of a ranking answer")
    max_attempts: int = Field(3, ge=1, description="calls per user until the answer parses; the reference "
                              "re-asks without bound (named difference: bounded_requery)")
    retry_temperature: float = Field(1.0, ge=0, description="temperature of re-asks (the reference leaves the "
                                     "API default, 1.0)")
    seed: int = Field(0, description="sampling seed; attempt a uses seed + a")
    constrained: bool = Field(False, description="ask the engine for a JSON array of candidate titles (grammar); "
                              "off in the reference; small local models need it to comply")
    profile_max_tokens: int = Field(300, ge=1, description="completion cap of a generated user profile")


class BeyondUtilityConfig(BenchmarkConfig):
    name: Literal["beyond_utility"] = "beyond_utility"
    data: DataSpec = Field(default_factory=lambda: DataSpec(format="movielens-100k", path=Path("ml-100k")),
                           description="interactions with titles, read by the interaction data layer")
    filters: FilterConfig = Field(default_factory=FilterConfig, description="cleaning before the split")
    dataset_label: str = Field("movie", description="the templates' {dataset} word (reference: Beauty/Sports)")
    templates_dir: Path = Field(Path("evallmasrecommender/eva/templates"),
                                description="the reference's template files, relative to the data dir")
    task: Literal["ranking", "reranking"] = Field(
        "ranking", description="ranking: target + negatives; reranking: candidates from pool_path")
    pool_path: Path | None = Field(None, description="reranking: JSONL {user_id, candidates} (e.g. the round-robin "
                                   "union written by `llmrec baselines pool`)")
    num_negatives: int = Field(19, ge=1, description="ranking: negatives per user, never touched by the user")
    seed: int = Field(2020, description="seed of negatives and of each user's candidate shuffle")
    k: int = Field(5, ge=1, le=10, description="top-K of the metrics (reference --metric_len)")
    list_len: int = Field(10, ge=1, description="titles the model must return (L)")
    users: UserSampling = Field(default_factory=UserSampling)
    prompts: list[Prompt] = Field(default_factory=lambda: ["history"],
                                  min_length=1, description=f"prompt strategies, each a setting: {', '.join(PROMPTS)}")
    history_lens: list[int | None] = Field(default_factory=lambda: [10], min_length=1, description="most recent history items "
                                           f"shown (None: all; paper sweep {list(PAPER_HISTORY_LENS)}; 0: no history)")
    orders: list[Order] = Field(default_factory=lambda: ["shuffled"], min_length=1, description="candidate order: shuffled "
                                "(stable per user) and/or target_first (position-bias control → CandDif)")
    paraphrase: Literal["per_user", "fixed"] = Field(
        "per_user", description="which of the 5 template paraphrases: per_user = stable seeded pick, recorded "
        "(the reference: unseeded random.randint); fixed = paraphrase_index for everyone")
    paraphrase_index: int = Field(0, ge=0, le=4, description="paraphrase=fixed: the line used")
    title_match: Literal["reference", "fuzzy"] = Field(
        "reference", description="title → item: exact, then case-insensitive (reference); fuzzy adds rapidfuzz "
        "matching above fuzzy_threshold (changes hallucination counts)")
    fuzzy_threshold: float = Field(90.0, ge=0, le=100, description="fuzzy: minimum rapidfuzz WRatio score")
    padding: Literal["zero", "untitled_item"] = Field(
        "zero", description="short answers are padded to list_len: zero = id 0 (counted as hallucination); "
        "untitled_item = the reference's 'N\\A' quirk (the pad maps to an untitled catalog item if one exists)")
    query: QueryConfig = Field(default_factory=QueryConfig)

    @field_validator("prompts", "orders", "history_lens")
    @classmethod
    def _unique(cls, v: list) -> list:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"must be a non-empty list without repeats, got {v}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "BeyondUtilityConfig":
        if self.task == "reranking" and self.pool_path is None:
            raise ValueError("task: reranking needs pool_path (JSONL {user_id, candidates})")
        if self.k > self.list_len:
            raise ValueError(f"k={self.k} exceeds list_len={self.list_len}")
        if any(h is not None and h < 0 for h in self.history_lens):
            raise ValueError(f"history_lens must be >= 0 or null, got {self.history_lens}")
        return self
