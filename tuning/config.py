"""Configs of ``llmrec train`` (``TrainConfig``) and ``llmrec tune`` (``TuneConfig``).

A train config names the data, its cleaning and split, the model (``model.name`` picks the
model's own config class, so its defaults apply and unknown keys fail), the trainer, MLflow
tracking and outputs. A tune config adds ``tune:``: a search space over dotted keys of the
train config, the ASHA scheduler, resources per trial and concurrency.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializeAsAny, model_validator

from llmrec.config import OutputBase, StrictModel
from llmrec.errors import ConfigError
from llmrec.tracking import default_tracking, tracking_section
from llmrec.models.base import ModelConfig, get_model_class, model_config
from llmrec.models.trainer import TrainerConfig
from llmrec.interactions.config import DataSpec, FilterConfig, SplitConfig
from llmrec.tuning.sweep import SchedulerConfig


BaselineTracking = tracking_section("llmrec-baselines")


class OutputConfig(OutputBase):
    """Where run directories, checkpoints and exports go (the shared output shape plus the exports)."""

    dir: str = Field("runs/baselines", description="parent of run (and sweep) directories: a local folder "
                     "(relative: to the driver's working directory) or a storage URI every node and the "
                     "next driver can reach (s3://bucket/baselines, gs://…); --resume reads it back")
    export_topk: int = Field(20, ge=0, description="write each test user's top-K items to topk_test.parquet (0 = off)")
    export_embeddings: bool = Field(True, description="write user/item embeddings (models that have them)")


class TrainConfig(StrictModel):
    """One training run: data -> filters -> split -> model -> trainer -> test metrics."""

    data: DataSpec = Field(description="where the interactions come from (format + path)")
    filters: FilterConfig = Field(default_factory=FilterConfig)
    split: SplitConfig = Field(default_factory=SplitConfig)
    model: SerializeAsAny[ModelConfig] = Field(description="model settings; `name` picks the model")
    train: TrainerConfig = Field(default_factory=TrainerConfig)
    tracking: BaselineTracking = default_tracking("llmrec-baselines")
    output: OutputConfig = Field(default_factory=OutputConfig)

    @model_validator(mode="before")
    @classmethod
    def _model(cls, data: Any) -> Any:
        if isinstance(data, dict) and "model" in data:
            data = {**data, "model": model_config(data["model"], "model")}
        return data

    @model_validator(mode="after")
    def _no_sequential_leakage(self) -> "TrainConfig":
        if get_model_class(self.model.name).uses_sequence and self.split.protocol == "random":
            raise ValueError(
                f"model {self.model.name!r} is a sequential model and split.protocol is 'random': a random split "
                f"puts a user's later items into the training sequence that predicts earlier ones (leakage); "
                f"use split.protocol: loo or temporal (RecBole refuses a random order for sequential models too)"
            )
        return self

    def semantic(self) -> dict:
        """What determines results (not where they are written or tracked)."""
        return self.model_dump(
            mode="json", exclude={"tracking": True, "output": True, "train": {"progress", "device", "num_threads"}}
        )


class SearchDim(StrictModel):
    """One search-space dimension."""

    type: Literal["loguniform", "uniform", "choice", "randint"] = Field(description="distribution")
    low: float | None = Field(None, description="loguniform/uniform/randint: lower bound")
    high: float | None = Field(None, description="loguniform/uniform/randint: upper bound (randint: exclusive)")
    values: list[Any] | None = Field(None, description="choice: the candidates")

    @model_validator(mode="after")
    def _bounds(self) -> "SearchDim":
        if self.type == "choice":
            if not self.values:
                raise ValueError("choice needs a non-empty 'values' list")
        elif self.low is None or self.high is None or self.low >= self.high:
            raise ValueError(f"{self.type} needs low < high (got low={self.low}, high={self.high})")
        elif self.type == "loguniform" and self.low <= 0:
            raise ValueError(f"loguniform needs low > 0 (got {self.low})")
        return self

    def domain(self):
        """The Ray Tune search domain (``tune.choice``, ``tune.randint``, ``tune.uniform``, …)."""
        from ray import tune

        if self.type == "choice":
            return tune.choice(self.values)
        if self.type == "randint":
            return tune.randint(int(self.low), int(self.high))
        return getattr(tune, self.type)(self.low, self.high)

    def example(self) -> Any:
        """A value of the right type, used to validate the key before the sweep starts."""
        if self.type == "choice":
            return self.values[0]
        return int(self.low) if self.type == "randint" else self.low


class ResourcesConfig(StrictModel):
    """Resources one trial reserves."""

    cpu: float = Field(1.0, gt=0, description="CPUs per trial (also the trial's torch threads, rounded down)")
    gpu: float = Field(0.0, ge=0, description="GPUs per trial (fractions share a GPU)")


class TuneSection(StrictModel):
    """The sweep."""

    search_space: dict[str, SearchDim] = Field(
        description="dotted train-config key -> distribution, e.g. train.learning_rate"
    )
    num_samples: int = Field(8, ge=1, description="trials to sample")
    metric: str | None = Field(None, description="validation metric to optimise; default train.metric")
    mode: Literal["max", "min"] = Field("max", description="maximise or minimise the metric")
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    resources_per_trial: ResourcesConfig = Field(default_factory=ResourcesConfig)
    max_concurrent: int | None = Field(
        None, ge=1, description="trials running at once; default: as many as the cluster's CPUs/GPUs fit"
    )
    seed: int | None = Field(2020, description="seed of the search-space sampler")
    max_failures: int = Field(2, ge=-1, description="retries of a failed trial (Ray Tune FailureConfig; -1 = "
                              "without limit); a retried trial continues from its last checkpoint")
    ray_address: str | None = Field(None, description="Ray cluster address; None starts a local Ray")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a local Ray started here")
    storage_path: str | None = Field(
        None, description="where Ray Tune keeps experiment state and trial checkpoints: a local folder or a URI "
                          "(s3://bucket/tune) every node can reach; default: the sweep directory's parent "
                          "(output.dir). Relative paths are made absolute on the driver.")


class TuneConfig(TrainConfig):
    """A train config plus ``tune:``; every trial is the train config with sampled values set."""

    tune: TuneSection

    @model_validator(mode="after")
    def _space(self) -> "TuneConfig":
        base = self.model_dump(mode="json", exclude={"tune"})
        for key in self.tune.search_space:
            node: Any = base
            parts = key.split(".")
            for depth, part in enumerate(parts):
                if not isinstance(node, dict) or part not in node:
                    where = ".".join(parts[:depth]) or "the top level"
                    allowed = sorted(node) if isinstance(node, dict) else []
                    raise ValueError(f"search_space key '{key}': no '{part}' under {where}; allowed: {allowed}")
                node = node[part]
        return self

    def train_config(self) -> dict:
        """The base train config (without ``tune``) as plain data."""
        return self.model_dump(mode="json", exclude={"tune"})


def set_path(data: dict, dotted: str, value: Any) -> dict:
    """Return a copy of ``data`` with the dotted key set to ``value`` (intermediate mappings copied)."""
    parts = dotted.split(".")
    out = dict(data)
    node = out
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            raise ConfigError(f"'{dotted}': '{part}' is not a mapping")
        node[part] = dict(child)
        node = node[part]
    node[parts[-1]] = value
    return out
