"""RunConfig: everything one ``llmrec run`` needs, validated before any work starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, model_validator

import yaml

from llmrec.config import (Location, OutputBase, StrictModel, apply_overrides, read_yaml, semantic_conflicts,
                           validate)
from llmrec.errors import ConfigError
from llmrec.rundir import RunDir
from llmrec.tracking import TrackingConfig
from llmrec.pipelines.protocol import BenchmarkConfig
from llmrec.pipelines.runner.budget import BudgetConfig, check_budget_prices
from llmrec.pipelines.runner.stop_when import StopWhenConfig
from llmrec.pipelines.runner.cost import Prices
from llmrec.pipelines.registry import benchmark_config
from llmrec.serving.engine import EngineConfig, engine_config

REQUEST_CACHE_FILE = "request_cache.sqlite"  # the request cache's default file name (see OutputConfig.cache_path)
RUN_FACTS_FILE = RunDir.FACTS  # in a run directory: role → what its engine learned while running (run_facts)


class DataConfig(StrictModel):
    dir: Location | None = Field(
        None, description="data directory or storage URI (s3://bucket/data: copied once to the driver's cache); "
                          "when given, the data must be there (no fallback); else $LLMREC_DATA_DIR, else the "
                          "per-user cache (see `llmrec data`)"
    )


class ExecutionConfig(StrictModel):
    mode: Literal["actors", "serve"] = Field(
        "actors",
        description="actors: each Ray Data actor holds an engine; serve: actors call a Ray Serve deployment",
    )
    concurrency: int = Field(1, ge=1, description="engine actors (or Serve replicas)")
    batch_size: int = Field(4, ge=1, description="prefix groups (samples sharing a prompt prefix) per Ray Data batch")
    num_cpus_per_worker: float = Field(1.0, gt=0, description="CPUs reserved per engine actor/replica")
    num_gpus_per_worker: float = Field(0.0, ge=0, description="GPUs reserved per engine actor/replica")
    judge_replicas: int = Field(
        1, ge=0, description="actors mode: engine actors of the judge's own pool, shared by all subject actors, so "
                             "neither engine idles behind the other; 0 = each subject actor also holds the judge. "
                             "A remote judge (type: openai) always runs inside the subject actors")
    judge_num_cpus_per_worker: float | None = Field(
        None, gt=0, description="CPUs reserved per judge actor; None = num_cpus_per_worker")
    judge_num_gpus_per_worker: float | None = Field(
        None, ge=0, description="GPUs reserved per judge actor (a multi-GPU judge: the GPUs of one of "
                                "its replicas, e.g. tensor x pipeline parallel size); None = num_gpus_per_worker")
    retries: int = Field(3, ge=0, description="engine retries per request before it is recorded as failed")
    backoff_s: float = Field(1.0, ge=0, description="first retry delay; doubles each retry")
    serve_backoff_s: float = Field(
        5.0, ge=0, description="serve mode: first retry delay, doubling (with retries=3: 5+10+20 s, long enough "
                               "for Serve to replace a dead replica)")
    request_timeout_s: float = Field(600.0, gt=0, description="serve mode: seconds one engine call may take before "
                                                               "it counts as failed (and is retried)")
    max_restarts: int = Field(
        3, ge=-1, description="times Ray restarts a dead engine actor (its batch is re-run); -1 = without limit")
    kv_budget_tokens: int | None = Field(
        None, ge=1, description="KV-cache tokens of one replica (the engine logs its measured figure at start): "
                                "rows are packed to it, in the engine's KV blocks; None = rows of batch_size prefix "
                                "groups, and `llmrec plan` uses the engine's planned figure")
    max_failed_share: float = Field(
        0.1, ge=0, le=1, description="`llmrec run` exits 1 (results kept) when more than this share of the samples "
                                     "failed; a run whose every sample failed always does")
    max_judge_failed_share: float = Field(
        0.1, ge=0, le=1, description="`llmrec run` and `llmrec rejudge` exit 1 (results kept) when the judge's "
                                     "answers could not be read for more than this share of the judged units (the "
                                     "judge_failure_rate beside a judged headline, marked '!'); a judge that "
                                     "failed every call always does")
    order_by_prefix: bool = Field(True, description="keep samples sharing a prompt prefix together on one replica, longest first")
    prices: Prices | None = Field(
        None, description="price table of the cost ledger (cost/usd): per million input / cached / output tokens "
                          "(hosted APIs) and per GPU-, CPU- or node-hour held (clusters), per role (subject, judge); "
                          "None = no cost/usd (docs/cost.md)")
    budget: BudgetConfig | None = Field(
        None, description="stop the run cleanly (exit 3, finished samples stored) once it has spent this many tokens, "
                          "USD or GPU-hours, all its invocations together; a re-run with a larger budget resumes")
    stop_when: StopWhenConfig | None = Field(
        None, description="send whole clusters in a seeded random order and stop once an anytime-valid confidence "
                          "sequence decides the run is not worse, or worse, than a pinned baseline by more than a "
                          "margin (docs/gate.md); a re-run without it resumes to the full set")

    @model_validator(mode="after")
    def _budget_priced(self) -> "ExecutionConfig":
        problem = check_budget_prices(self.budget, self.prices)
        if problem:
            raise ValueError(problem)
        return self


class RayConfig(StrictModel):
    address: str | None = Field(None, description="Ray cluster address ('auto' = running cluster); None = local")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a local Ray instance")
    worker_niceness: int = Field(
        0, ge=-20, le=19, description="scheduling niceness of a local Ray instance's workers (the engine actors); "
        "Ray's own default is 15, which lets any other process on the node preempt an engine: llama.cpp on 2 "
        "cores generated 7 % slower in a Ray actor at 15. A cluster sets it where `ray start` runs "
        "(RAY_worker_niceness=0)")
    metrics: bool = Field(
        False, description="Ray's metrics, event-loop statistics and task events in a local Ray instance (what Ray's "
        "dashboard, `ray list tasks` and `ray timeline` read; a local instance runs no dashboard). Off by default: on 2 "
        "cores beside two engine actors they took about 1.5 of the 10 CPU-seconds Ray's own processes used in a "
        "2-minute run. A cluster keeps its own settings")


class OutputConfig(OutputBase):
    """The shared output shape plus resume and the request cache."""

    resume: bool = Field(True, description="skip samples already in the result store")
    cache: bool = Field(True, description="answer repeated requests from the request cache")
    transcripts: bool = Field(
        True, description="store the transcript of every sample: each engine call's request (messages, the prompt "
                          "an engine rendered itself, sampling, constraint) beside its result, each distinct text "
                          "once per run in the run directory's transcripts/ (`llmrec view` reads them); false: "
                          "results only")
    cache_path: Path | None = Field(None, description="request cache sqlite file on the driver's disk; default "
                                                      f"<output.dir>/{REQUEST_CACHE_FILE} (URI output.dir: the per-user "
                                                      "cache)")


class JudgingConfig(StrictModel):
    """How a judged benchmark's judge answers: pinned sampling, and the jury when the ``judge:`` section lists
    several engines (the first is ``judge``, the others ``jurors``)."""

    temperature: float = Field(0.0, ge=0.0, description="temperature of every judge request (pinned: the judge "
                                                         "stages' own value is replaced)")
    seed: int | None = Field(0, description="sampling seed of every judge request (None: the engine's default)")
    tie: Literal["strict", "first"] = Field(
        "strict", description="a jury's tie: strict = the answer that counts against the subject (a violation "
                              "counts; the benchmark's adverse_labels); first = the first listed judge's answer")
    jurors: list[SerializeAsAny[EngineConfig]] = Field(
        default_factory=list, description="the jury's judges after the first (filled from a `judge:` list)")


class RejudgeSource(StrictModel):
    """A run made by `llmrec rejudge`: which run's subject outputs it judged again, and that run's judge."""

    source_run: str = Field(description="the run directory (or storage URI) whose subject outputs are judged")
    source_config_hash: str = Field(description="the source run's config hash (its semantic sections)")
    source_judge: dict[str, Any] | list[dict[str, Any]] | None = Field(
        None, description="the source run's judge section(s), as recorded there")
    stages: list[str] = Field(description="the judge stages run again")


# the sections of a run config that say where and how fast it runs, not what its results are (``RunConfig.semantic``)
PLACEMENT_SECTIONS = ("execution", "ray", "tracking", "output", "data")


class RunConfig(StrictModel):
    """One evaluation: a benchmark, a subject engine, an optional judge engine, and how to run."""

    benchmark: SerializeAsAny[BenchmarkConfig] = Field(description="benchmark settings; `name` picks the benchmark")
    engine: SerializeAsAny[EngineConfig] = Field(description="the subject model's engine; `type` picks it")
    judge: SerializeAsAny[EngineConfig] | None = Field(None, description="judge engine for judged benchmarks (a "
                                                                         "list of engine sections: a jury)")
    judging: JudgingConfig | None = Field(None, description="the judge's pinned sampling and a jury's tie rule")
    rejudge: RejudgeSource | None = Field(None, description="set by `llmrec rejudge`: the run whose subject "
                                                            "outputs this run judges again")
    data: DataConfig = Field(default_factory=DataConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)

    @model_validator(mode="before")
    @classmethod
    def _registered(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "benchmark" in data:
            data["benchmark"] = benchmark_config(data["benchmark"])
        if "engine" in data:
            data["engine"] = engine_config(data["engine"], "engine")
        if isinstance(data.get("judge"), list):  # a jury: the first judge, the others jurors
            judges = data["judge"]
            if not judges:
                raise ConfigError("judge: an empty list (give one engine section, or several for a jury)")
            judging = dict(data.get("judging") or {})
            if judging.get("jurors"):
                raise ConfigError("judge is a list and judging.jurors is set: list the jury in one place (judge:)")
            data["judge"], judging["jurors"] = judges[0], judges[1:]
            data["judging"] = judging
        if data.get("judge") is not None:
            data["judge"] = engine_config(data["judge"], "judge")
        if isinstance(data.get("judging"), dict) and data["judging"].get("jurors"):
            data["judging"] = {**data["judging"], "jurors": [engine_config(j, f"judge[{i}]") for i, j in
                                                             enumerate(data["judging"]["jurors"], 1)]}
        return data

    @model_validator(mode="after")
    def _placement(self) -> "RunConfig":
        from llmrec.pipelines.runner.placement import placement_errors

        errors = placement_errors(self.engine, self.judge, self.execution)
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def semantic(self) -> dict:
        """What determines the results (not where/how fast they are computed). ``judging`` and ``rejudge`` appear
        only when set (a run without them keeps the name and fingerprint it had before they existed)."""
        out = self.model_dump(mode="json", exclude=set(PLACEMENT_SECTIONS))
        for key in ("judging", "rejudge"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


def result_sections(config: dict) -> dict:
    """A run config as a mapping (a run directory's stored config, or flattened MLflow params: ``engine.n_ctx``)
    without the sections that say where and how fast it ran (``PLACEMENT_SECTIONS``): what runs are told apart by."""
    return {k: v for k, v in config.items() if str(k).split(".", 1)[0] not in PLACEMENT_SECTIONS}


def resume_conflicts(cfg: RunConfig, stored_yaml: str) -> list[str]:
    """What differs, among the settings that determine the results (``semantic``), between the
    config a run directory's results were produced under (``RunDir.CONFIG``) and ``cfg``: one
    ``key: stored → now`` line per key. A key only one side has (an option added or removed by an
    llmrec upgrade) is not compared, unless the other side holds a value where it has a mapping
    (``judge: null`` → a judge). URLs are compared as recorded (credentials redacted)."""
    try:
        from llmrec.config import BoundedLoader

        stored = yaml.load(stored_yaml, Loader=BoundedLoader)
    except yaml.YAMLError as e:
        return [f"{RunDir.CONFIG} is not readable YAML ({e})"]
    return config_conflicts(cfg, stored if isinstance(stored, dict) else {})


def config_conflicts(cfg: RunConfig, stored: dict) -> list[str]:
    """``resume_conflicts`` against a stored config given as a mapping (e.g. a result shard's provenance)."""
    from llmrec.redact import redacted

    return semantic_conflicts(redacted(cfg.semantic()), stored)


def absolute_locations(cfg: RunConfig) -> RunConfig:
    """The config with every local location made absolute (URIs unchanged), done on the driver
    before anything is sent to a cluster, where the working directory is not the user's."""
    from llmrec import storage

    out = cfg.output.model_copy(update={
        "dir": storage.resolve(cfg.output.dir),
        "cache_path": Path(storage.resolve(cfg.output.cache_path)) if cfg.output.cache_path else None})
    data = cfg.data.model_copy(update={"dir": storage.resolve(cfg.data.dir) if cfg.data.dir else None})
    from llmrec import settings

    tr = cfg.tracking
    uri = tr.uri or settings.env_tracking_uri() or settings.DEFAULT_TRACKING_URI
    if uri and uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + storage.resolve(uri[len("sqlite:///"):])
    tracking = tr.model_copy(update={"artifact_root": storage.resolve(tr.artifact_root), "uri": uri})
    return cfg.model_copy(update={"output": out, "data": data, "tracking": tracking})


def load_run_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    raw = apply_overrides(read_yaml(path), overrides)
    for key in ("benchmark", "engine"):
        if key not in raw:
            raise ConfigError(f"{path}: missing required section '{key}'")
    return validate(RunConfig, raw)
