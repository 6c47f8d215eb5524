"""BaselinesConfig: which candidates, which models (trained here or read from a run directory), which scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from llmrec.config import InsidePath, PathName, StrictModel
from llmrec.tracking import TrackingConfig


class ModelEntry(StrictModel):
    """One baseline: a model config trained by `llmrec train`'s path, or an already trained run."""

    model: dict[str, Any] | None = Field(None, description="model section of a train config, e.g. {name: bprmf}")
    run_dir: str | None = Field(None, description="a `llmrec train` run directory (its recorded config + checkpoint/): "
                                "a local folder or a storage URI (s3://bucket/baselines/run)")
    label: PathName | None = Field(None, description="run name suffix and file name part (default: the model name)")
    train: dict[str, Any] = Field(default_factory=dict, description="overrides of the shared train section")
    history_cut: int | None = Field(None, ge=1, description="history-length sweep: train and rank with every "
                                    "user's history cut to its last N items (the LLM's history_lens); model only")

    @model_validator(mode="after")
    def _one(self) -> "ModelEntry":
        if (self.model is None) == (self.run_dir is None):
            raise ValueError("give exactly one of model (train it) or run_dir (reuse a trained run)")
        if self.history_cut is not None and self.run_dir is not None:
            raise ValueError("history_cut retrains the model on cut histories; it needs model, not run_dir")
        return self


class PoolConfig(StrictModel):
    """Re-ranking pool: round-robin union of the models' full-catalogue top lists (paper §4.8)."""

    size: int = Field(20, ge=1, description="pool size after de-duplication")
    topk: int = Field(20, ge=1, description="top items taken from each model")
    out: InsidePath = Field(Path("pool.jsonl"), description="JSONL {user_id, candidates}; relative to `out`")


class BaselinesConfig(StrictModel):
    candidates: Path = Field(description="candidates JSONL written by the benchmark: {user_id, history, "
                             "candidates (raw ids), ids (contract ids), line (contract fields)}")
    score_task: str = Field("beyond-utility", description="score task (llmrec list) that scores every model")
    score_options: dict[str, Any] = Field(default_factory=dict, description="its options, e.g. {items: ..., k: 5}")
    list_len: int = Field(10, ge=1, description="ids per ranked list (L; LLM runs return 10)")
    base: dict[str, Any] = Field(description="shared train config (data, filters, split, train, output) the "
                                 "models are trained with; use split.protocol: loo so the target is held out")
    models: list[ModelEntry] = Field(min_length=1, description="the baselines")
    pool: PoolConfig | None = Field(None, description="also write the re-ranking pool of these models")
    out: Path = Field(Path("runs/baselines_ranked"), description="folder for per-model predictions and metrics")
    tracking: TrackingConfig = Field(default_factory=lambda: TrackingConfig(experiment="beyond-utility"))

    @model_validator(mode="after")
    def _score_options(self) -> "BaselinesConfig":
        """The score task exists and its options have the types and ranges it allows (before any training)."""
        from llmrec.errors import ConfigError
        from llmrec.pipelines.registry import SCORE_TASKS

        try:
            task = SCORE_TASKS.get(self.score_task)
            unknown = sorted(set(self.score_options) - set(task.options))
            if unknown:
                raise ConfigError(f"score_options: score task '{task.name}' takes no option(s) {unknown}; it takes: "
                                  f"{task.describe_options() or 'none'}")
            task.checked_options(self.score_options, lambda k: f"score_options.{k}")
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return self
