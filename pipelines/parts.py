"""The values a benchmark and the runner exchange: samples, the benchmark's config, its stages, judged
decisions, paired outcomes, baselines' data and data manifests. Plain data, no behaviour of the benchmark's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from pydantic import Field

from llmrec.config import StrictModel
from llmrec.pipelines.record import ASSETS_KEY
from llmrec.types import Request, Result

Sample = dict[str, Any]
"""A sample in flight: the runner's record fields, the benchmark's payload fields and its transient ``_`` inputs
(declared and checked: see ``pipelines/record.py``). The shared assets ride under ``ASSETS_KEY``; like every
``_`` key they are dropped before results are stored."""



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

    ``render(sample) -> Request | None`` (None: this sample skips the stage; ``sample`` is a read-only view);
    ``accept(sample, result) -> dict`` returns the fields to merge into the sample.
    ``engine`` picks the configured engine: ``"subject"`` or ``"judge"``.
    ``shrink(sample, request, result) -> Request | None``: optional truncation policy,
    called when a request is over the engine's context; return a smaller request to try
    instead, or None to record the sample as ``over_context`` (the default: never truncate).
    ``reads``: record / payload fields or transient keys the stage reads (declared fields, checked at
    registration; on entry a sample lacking one fails with the stage, its ``sample_id`` and the missing keys);
    ``writes``: the payload fields ``accept`` (and ``shrink``) may set. The runner validates what ``accept``
    returns against the payload's field types; an undeclared key or a wrong type fails that sample naming
    the field path.
    """

    name: str
    render: Callable[[Sample], Request | None]
    accept: Callable[[Sample, Result], dict]
    engine: Literal["subject", "judge"] = "subject"
    shrink: Callable[[Sample, Request, Result], Request | None] | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopStage:
    """Several rounds of model calls per sample, each round depending on the last
    (e.g. pairwise heapsort: which pair to compare next depends on earlier answers).

    ``next_requests(sample) -> list[Request]`` returns the next round (empty: done; ``sample`` is read-only);
    ``accept(sample, requests, results) -> dict`` merges that round's results into the
    sample (keep what later rounds need, e.g. a memo of answered comparisons, in it).
    The runner loops until every sample returns an empty round or ``max_rounds`` is hit.
    ``reads`` / ``writes``: as for ``LLMStage``.
    """

    name: str
    next_requests: Callable[[Sample], list[Request]]
    accept: Callable[[Sample, list[Request], list[Result]], dict]
    engine: Literal["subject", "judge"] = "subject"
    max_rounds: int = 64
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


Stage = LLMStage | LoopStage


@dataclass(frozen=True)
class JudgeDecision:
    """One decision a judge made about one stored sample (``Judged.judge_decisions``): ``decision`` names the
    question (PrefEval: ``violate``), ``unit`` what it was asked about within the sample ("" when the sample is
    the unit; GISTBench: ``interest|object``), ``label`` the judge's answer (a bool, a str or an int). Two judges
    agree on a unit when their labels for the same (sample, decision, unit) are equal. A judge answer that could
    not be read is labelled :data:`UNREADABLE`, never given a default label."""

    decision: str
    unit: str
    label: bool | str | int


UNREADABLE = "unreadable"
"""The label of a judged decision whose judge answer could not be read (``JudgeDecision``): its own outcome in
agreement statistics (counted and shown) and no vote in a jury."""


@dataclass(frozen=True)
class Outcome:
    """One per-unit result of a headline metric, the unit ``llmrec compare`` pairs across runs.

    ``sample_id`` names the unit (a sample, or a user / group for metrics computed per group) and is
    the join key between runs; ``setting`` is the unit's setting (``setting_label``: the benchmark's
    ``group_keys`` as ``key=value,…``); ``cluster`` is the resampling unit of the paired bootstrap and
    permutation test (units of one cluster, e.g. one user's samples, are resampled / swapped together);
    ``statistic`` is how the metric summarizes the units: ``mean`` (the metric is the mean of the
    values) or ``median``."""

    sample_id: str
    setting: str
    cluster: str
    metric: str
    value: float
    statistic: Literal["mean", "median"] = "mean"



Ranker = Callable[[list[str], list[list[str]]], list[list[str]]]
"""A trained recommender as ``HasBaselines.ranking_baselines`` sees it: users (raw ids) and each one's
candidates (raw item ids) → each user's candidates, best first."""


@dataclass(frozen=True)
class RankingBaselines:
    """What trained recommenders need to rank a benchmark's own candidates (``HasBaselines.ranking_baselines``).

    ``data`` and ``filters``: the interaction-layer sections (a ``llmrec train`` config's ``data`` /
    ``filters``) whose leave-one-out split holds out the target each sample asks for; ``rows(rank)``: the
    samples' candidates ranked by ``rank`` → rows ``aggregate`` takes, each keeping its sample's
    ``sample_id`` and setting fields (a baseline's row stands beside the LLM's row of the same sample)."""

    data: dict[str, Any]
    filters: dict[str, Any]
    rows: Callable[[Ranker], list[Sample]]


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

