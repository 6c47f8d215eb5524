"""``SFTConfig``: one LoRA adapter trained by ``llmrec sft CONFIG.yaml`` (optionally swept with ``tune:``).

Defaults follow the PerRecBench paper's recipe (§5: LoRA rank 16, 2 epochs, batch 32, lr 1e-5)
except where noted; ``batch_size`` is global (all workers together, per optimizer step).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from llmrec.config import OutputBase, StrictModel
from llmrec.tracking import default_tracking, tracking_section
from llmrec.tuning.config import SearchDim
from llmrec.tuning.sweep import SchedulerConfig


class SFTData(StrictModel):
    """JSONL training data: ``{"messages": [...], "completion": str}``, ``{"messages": [..., assistant]}``
    (the last assistant message is the target) or ``{"prompt": str, "completion": str}`` (raw text)."""

    train: Path = Field(description="training JSONL (e.g. sft/perrecbench/point/train.jsonl)")
    valid: Path | None = Field(None, description="validation JSONL for the eval loss; None = split off "
                               "valid_fraction of train")
    valid_fraction: float = Field(0.1, ge=0, lt=1, description="share of train held out when `valid` is None")
    max_examples: int | None = Field(None, ge=1, description="use only the first N training examples")
    max_length: int = Field(2048, ge=16, description="prompt + target tokens; longer examples are dropped "
                            "(counted and logged), never truncated")
    prompt_format: Literal["auto", "chat", "gemma", "plain"] = Field(
        "auto", description="how messages become text; must match the transformers engine's prompt_format "
        "used in evaluation (auto: the tokenizer's chat template if any, else Gemma turns)")
    manifest: Path | None = Field(None, description="data manifest logged with the run (held-out topics/groups); "
                                  "None = manifest.json beside the train file or one folder up, if present")


class LoraSection(StrictModel):
    """peft LoRA settings."""

    r: int = Field(16, ge=1, description="LoRA rank (paper: 16)")
    alpha: int = Field(32, ge=1, description="LoRA alpha (scaling = alpha / r)")
    dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout")
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"],
                                      description="module names that get adapters")


class TrainSection(StrictModel):
    """Optimisation."""

    epochs: float = Field(2.0, gt=0, description="passes over the training set (paper: 2)")
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimizer steps (overrides epochs)")
    batch_size: int = Field(32, ge=1, description="examples per optimizer step, all workers together (paper: 32)")
    micro_batch_size: int = Field(1, ge=1, description="examples per forward pass on one worker (gradients "
                                  "accumulate up to batch_size / num_workers)")
    learning_rate: float = Field(1e-5, gt=0, description="AdamW learning rate (paper: 1e-5)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    warmup_steps: int = Field(0, ge=0, description="linear warm-up steps, then linear decay to 0")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping")
    eval_every: int = Field(0, ge=0, description="eval loss every N steps (0: at the end only); always at step 0")
    checkpoint_every: int = Field(10, ge=1, description="checkpoint every N steps (and at the end)")
    seed: int = Field(0, description="LoRA init and data order")


class ScalingSection(StrictModel):
    """Ray Train workers (data-parallel: each takes its share of every batch; DDP all-reduces gradients)."""

    num_workers: int = Field(1, ge=1, description="training workers")
    use_gpu: bool = Field(False, description="one GPU per worker")
    cpus_per_worker: float = Field(1.0, gt=0, description="CPUs per worker (also its torch threads, rounded down)")
    dtype: Literal["auto", "float32", "bfloat16"] = Field("auto", description="auto: float32 on CPU, bfloat16 on GPU")
    max_failures: int = Field(0, ge=0, description="worker failures Ray Train recovers from the last checkpoint")


class RaySection(StrictModel):
    address: str | None = Field(None, description="Ray cluster address; None starts a local Ray")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a local Ray started here")


SFTTracking = tracking_section("llmrec-sft")


class OutputSection(OutputBase):
    """The shared output shape; rerunning the same run_name resumes from its last checkpoint."""

    dir: str = Field("runs/sft", description="parent folder of run directories (Ray Train storage_path; a local "
                     "folder)")


class SFTTuneSection(StrictModel):
    """A sweep: every trial is this config with sampled values set at the dotted keys."""

    search_space: dict[str, SearchDim] = Field(description="dotted key -> distribution, e.g. lora.r, "
                                               "train.learning_rate, data.train (a format's file)")
    num_samples: int = Field(4, ge=1, description="trials to sample (grid values of `choice` are sampled)")
    metric: str = Field("valid/loss", description="metric to optimise (reported every step)")
    mode: Literal["min", "max"] = Field("min", description="minimise or maximise the metric")
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    max_concurrent: int = Field(1, ge=1, description="trials at once (each runs its own Ray Train workers)")
    seed: int | None = Field(2020, description="seed of the search-space sampler")


class SFTConfig(StrictModel):
    base_model: str = Field("embedded", description="HF causal-LM directory; 'embedded' = the embedded Gemma 3 "
                            "270M converted from its GGUF (no download)")
    data: SFTData
    lora: LoraSection = Field(default_factory=LoraSection)
    train: TrainSection = Field(default_factory=TrainSection)
    scaling: ScalingSection = Field(default_factory=ScalingSection)
    ray: RaySection = Field(default_factory=RaySection)
    tracking: SFTTracking = default_tracking("llmrec-sft")
    output: OutputSection = Field(default_factory=OutputSection)
    tune: SFTTuneSection | None = Field(None, description="run a Ray Tune sweep instead of one training run")

    @model_validator(mode="after")
    def _batches(self) -> "SFTConfig":
        per_worker, rem = divmod(self.train.batch_size, self.scaling.num_workers)
        if rem or per_worker < 1:
            raise ValueError(f"train.batch_size ({self.train.batch_size}) must be a multiple of "
                             f"scaling.num_workers ({self.scaling.num_workers})")
        if per_worker % self.train.micro_batch_size:
            raise ValueError(f"batch_size / num_workers ({per_worker}) must be a multiple of "
                             f"train.micro_batch_size ({self.train.micro_batch_size})")
        return self

    def semantic(self) -> dict[str, Any]:
        """What determines the adapter (not where it is written or tracked)."""
        return self.model_dump(mode="json", exclude={"tracking": True, "output": True, "ray": True, "tune": True,
                                                     "scaling": {"max_failures"}})


def with_absolute_paths(cfg: SFTConfig) -> SFTConfig:
    """Relative data/model paths resolved against the current directory (Ray Train workers run
    elsewhere, so they must receive absolute paths)."""
    data = cfg.data.model_copy(update={
        k: Path(v).expanduser().resolve() for k in ("train", "valid", "manifest") if (v := getattr(cfg.data, k))})
    base = cfg.base_model
    if base != "embedded" and Path(base).expanduser().exists():
        base = str(Path(base).expanduser().resolve())
    return cfg.model_copy(update={"data": data, "base_model": base})
