"""The Benchmark protocol: what a benchmark supplies to the generic runner.

(a) ``build_samples`` — data → samples (JSON-able dicts with a stable ``sample_id``);
(b)+(c) ``stages`` — ordered LLM stages, each rendering a request from a sample and
folding the engine's result back into it (multi-stage tasks chain them);
(d) ``score`` — per-sample score fields; (e) ``aggregate`` — rows → metrics.
``score_tasks`` serve ``llmrec score``. All plain functions: they run without Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from pydantic import Field

from llmrec.config import StrictModel
from llmrec.pipelines.common.jsonio import PredictionLine
from llmrec.types import Request, Result

Sample = dict[str, Any]

ASSETS_KEY = "_assets"
"""Sample key under which stages find the benchmark's shared read-only assets (see ``Benchmark``).
The runner sets it on every sample of a batch on the worker; like every ``_`` field it is
dropped before results are stored."""


def attach_assets(samples: list[Sample], assets: dict | None) -> list[Sample]:
    """Give every sample (the same, shared) assets dict, as the runner does on a worker.
    For calling stages directly, outside the runner (tests, previews)."""
    if assets is not None:
        for s in samples:
            s[ASSETS_KEY] = assets
    return samples


def sample_assets(sample: Sample) -> dict:
    """The shared assets of a sample; a clear error when a stage runs without them."""
    assets = sample.get(ASSETS_KEY)
    if assets is None:
        raise KeyError(f"sample '{sample.get('sample_id')}' carries no shared assets ('{ASSETS_KEY}'); the runner "
                       "attaches the benchmark's assets(cfg, data_dir) result (outside it: attach_assets)")
    return assets


class BenchmarkConfig(StrictModel):
    """Fields every benchmark config has; each benchmark subclasses it."""

    name: str = Field(description="benchmark (a package under pipelines/benchmarks/)")
    limit: int | None = Field(None, ge=1, description="keep only the first N samples (smoke runs)")


@dataclass(frozen=True)
class LLMStage:
    """One model call per sample.

    ``render(sample) -> Request | None`` (None: this sample skips the stage);
    ``accept(sample, result) -> dict`` returns the fields to merge into the sample.
    ``engine`` picks the configured engine: ``"subject"`` or ``"judge"``.
    ``shrink(sample, request, result) -> Request | None``: optional truncation policy,
    called when a request is over the engine's context; return a smaller request to try
    instead, or None to record the sample as ``over_context`` (the default: never truncate).
    ``requires``: sample keys the stage reads (checked on entry; a sample lacking one fails
    with the stage, its ``sample_id``, the missing keys and the keys present);
    ``adds``: the keys ``accept`` may return (any other key fails the sample).
    """

    name: str
    render: Callable[[Sample], Request | None]
    accept: Callable[[Sample, Result], dict]
    engine: Literal["subject", "judge"] = "subject"
    shrink: Callable[[Sample, Request, Result], Request | None] | None = None
    requires: tuple[str, ...] = ()
    adds: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopStage:
    """Several rounds of model calls per sample, each round depending on the last
    (e.g. pairwise heapsort: which pair to compare next depends on earlier answers).

    ``next_requests(sample) -> list[Request]`` returns the next round (empty: done);
    ``accept(sample, requests, results) -> dict`` merges that round's results into the
    sample (keep what later rounds need, e.g. a memo of answered comparisons, in it).
    The runner loops until every sample returns an empty round or ``max_rounds`` is hit.
    ``requires`` / ``adds``: as for ``LLMStage``.
    """

    name: str
    next_requests: Callable[[Sample], list[Request]]
    accept: Callable[[Sample, list[Request], list[Result]], dict]
    engine: Literal["subject", "judge"] = "subject"
    max_rounds: int = 64
    requires: tuple[str, ...] = ()
    adds: tuple[str, ...] = ()


Stage = LLMStage | LoopStage


@dataclass(frozen=True)
class ScoreTask:
    """``llmrec score NAME``: recompute metrics from a predictions file without a model.

    ``line`` is the schema every line must match (``common.jsonio.PredictionLine``: types, allowed
    values, the fields that identify a line); ``run(lines, options) -> metrics``.
    """

    name: str
    line: type[PredictionLine]
    run: Callable[[list[dict], dict], dict[str, Any]]
    description: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataFile:
    path: str  # relative to the data directory
    url: str
    sha256: str


@dataclass(frozen=True)
class DataManifest:
    """Files a benchmark reads, with where ``llmrec data fetch`` gets them."""

    name: str
    source: str
    files: tuple[DataFile, ...]
    probe: str  # a relative path whose presence means "the data is here"


@runtime_checkable
class Benchmark(Protocol):
    name: str
    config_cls: type[BenchmarkConfig]
    group_keys: tuple[str, ...]  # sample fields that split results (and MLflow child runs)
    score_tasks: tuple[ScoreTask, ...]
    data: DataManifest | None
    # optional: ``cli`` — a typer.Typer mounted as ``llmrec <name> ...`` (benchmark-specific verbs);
    # ``protocol_keys`` — config keys recorded in the MLflow ``protocol`` tag (``protocol_record``): every
    #   option that changes what is measured, e.g. a named difference from the reference;
    # ``predictions(rows)`` — the lines of ``predictions.jsonl`` for ``llmrec score``;
    # ``headline_metrics`` — tuple of metric keys shown by ``llmrec runs`` and pinned in the MLflow UI
    # ``assets(cfg, data_dir) -> dict`` — read-only data every sample's stages share (e.g. a corpus,
    #   prompt files), read once on the driver; the runner puts it in the Ray object store once and
    #   hands it to stages as ``sample[ASSETS_KEY]``. Stages never read files: on a cluster the data
    #   directory exists only where the driver runs. Anything per-sample travels in the sample itself.

    def build_samples(self, cfg: BenchmarkConfig, data_dir: Path) -> list[Sample]: ...

    def stages(self, cfg: BenchmarkConfig) -> list[Stage]: ...

    def score(self, cfg: BenchmarkConfig, sample: Sample) -> dict: ...

    def aggregate(self, cfg: BenchmarkConfig, rows: list[Sample]) -> dict[str, float]: ...

    def plots(self, cfg: BenchmarkConfig, rows: list[Sample], out_dir: Path) -> list[Path]: ...


def protocol_record(bench: Benchmark, cfg: BenchmarkConfig) -> dict[str, Any]:
    """The config keys a run records in its MLflow ``protocol`` tag: the benchmark's ``protocol_keys``
    (the options that change what is measured, e.g. a deliberate difference from the reference)."""
    keys = getattr(bench, "protocol_keys", ())
    return {k: v for k, v in cfg.model_dump(mode="json").items() if k in keys}
