"""LRWorldConfig: how samples are built (``build``) and how they are run (variants, sampling)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from llmrec.config import StrictModel
from llmrec.interactions.config import DataSpec
from llmrec.pipelines.protocol import BenchmarkConfig

Variant = Literal["base", "noisy", "fewshot", "cot"]


class SourceConfig(StrictModel):
    """One dataset LRWorld is built from; ``name`` is the dataset part of measure names."""

    name: str = Field(description="dataset name in measure names, e.g. ml-100k")
    data: DataSpec = Field(description="interactions (+ item metadata) read by the interaction data layer")
    embeddings: Path | None = Field(None, description="folder with user_embeddings.parquet and item_embeddings."
                                    "parquet from `llmrec train` (NeuMF); relative: the working dir if it exists "
                                    "there, else the data dir; absent: the neural factors are not built")
    image_descriptions: Path | None = Field(None, description="multimodal: JSON lines {item_id, description} "
                                            "(LMM descriptions of posters/product images); absent: not built")


class BuildConfig(StrictModel):
    """Sample construction (paper §3); defaults are the paper's where it gives one."""

    sources: list[SourceConfig] = Field(
        default_factory=lambda: [SourceConfig(name="ml-100k", data=DataSpec(format="movielens-100k",
                                                                            path=Path("ml-100k")))],
        min_length=1, description="datasets to build from")
    per_measure: int = Field(200, ge=1, description="samples per measure at most (fewer when the data has fewer)")
    seed: int = Field(0, description="seed of every random draw (targets, negatives)")
    min_support: float = Field(0.01, gt=0, le=1, description="association: apriori min support (paper 0.01)")
    min_confidence: float = Field(0.01, gt=0, le=1, description="association: rule min confidence (paper 0.01)")
    max_len: int = Field(2, ge=2, description="association: largest itemset (2: one antecedent item)")
    threshold: float = Field(0.01, ge=0, description="memory-based: cosine similarity threshold (paper 0.01)")
    clusters: int = Field(10, ge=1, description="neural: k-means clusters (paper 10)")
    per_cluster: int = Field(50, ge=1, description="neural: prototypes taken per cluster at most")
    history_len: int = Field(5, ge=1, description="knowledge: history items shown before the positive")
    user_items: int = Field(10, ge=1, description="items that describe a user (user targets/candidates): the "
                            "latest, or the most played where the data has no time (LastFM)")
    max_text_chars: int = Field(300, ge=20, description="text knowledge / multimodal: texts are cut to this length")
    factors: list[str] | None = Field(None, min_length=1, description="build only these factors (default: all)")


class SamplingConfig(StrictModel):
    temperature: float = Field(0.0, ge=0, description="sampling temperature (paper: 0)")
    max_tokens: int = Field(16, ge=1, description="answer tokens (direct answers)")
    cot_max_tokens: int = Field(384, ge=1, description="answer tokens with chain-of-thought")
    constrained: bool = Field(True, description="constrain the answer to the option labels (engines that "
                              "support Constraint(choices=...)); off for CoT. Unconstrained answers are "
                              "parsed by a regex search for a valid label")


class LRWorldConfig(BenchmarkConfig):
    name: Literal["lrworld"] = "lrworld"
    samples_file: Path | None = Field(None, description="a sample set folder from `llmrec lrworld build` (relative: "
                                      "the working dir if it exists there, else the data dir); absent: samples "
                                      "are built from `build` at run time")
    build: BuildConfig = Field(default_factory=BuildConfig)
    measures: list[str] | None = Field(None, min_length=1, description="run only these measures (factor/dataset/field)")
    per_measure: int | None = Field(None, ge=1, description="run only the first N samples of each measure")
    variants: list[Variant] = Field(default_factory=lambda: ["base"], min_length=1, description="base; noisy (one history "
                                    "item replaced by a random pool item); fewshot (k examples of other users); "
                                    "cot (\"Let's think step by step.\")")
    position_runs: int = Field(1, ge=1, le=20, description="runs with the answer at a new random position "
                               "(paper: 5 for the position-bias table)")
    shots: int = Field(3, ge=1, le=8, description="fewshot: examples per prompt")
    templates_dir: Path | None = Field(None, description="folder with replacement template files (same names "
                                       "as this package's templates/)")
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    seed: int = Field(0, description="seed of option shuffles, noise and few-shot picks")

    @field_validator("variants")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"must be a non-empty list without repeats, got {v}")
        return v
