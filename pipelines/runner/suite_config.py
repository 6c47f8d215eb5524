"""SuiteConfig: several subjects (engine sections) × several benchmark entries, run by `llmrec suite`.

A suite file::

    name: demo                      # the suite's folder under output.dir, and its MLflow experiment
    subjects:                       # name → an engine section (the schema of a run config's `engine:`)
      gemma: {type: llamacpp, n_ctx: 8192}
    benchmarks:                     # each: a run config path, or an inline fragment
      - configs/prefeval_mcq_demo.yaml                  # its benchmark/judge/data/execution sections are used
      - {config: configs/lrworld_demo.yaml, entry: lrw, benchmark: {variants: [base]}}   # a path, amended
      - entry: pr                                        # inline: benchmark (required), judge, data, execution
        benchmark: {name: perrecbench, ...}
      - {config: configs/beyond_utility_demo.yaml, baselines: {models: [{model: {name: mostpop}}]}}  # trained ones
    execution: {...}   ray: {...}   tracking: {...}   output: {...}     # shared by every run

Every (subject, entry) becomes an ordinary :class:`RunConfig` whose ``engine`` is the subject
and whose run directory is ``<output.dir>/<suite>/<subject>/<entry>/``. An entry's
``execution`` may change per-benchmark keys (batch_size, retries, judge_replicas, ...) but not
those that place the subject's engine, which is started once per subject for the whole suite (a run
config file's placement keys, e.g. its ``concurrency``, are left out: the suite's apply).
Everything is validated when the file is read; an error names the file and the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llmrec import storage
from llmrec.config import PathName, StrictModel, apply_overrides, read_yaml, validate
from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.rundir import RunDir, SuiteDir
from llmrec.pipelines.baselines.config import ModelEntry
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.run_config import (DataConfig, ExecutionConfig, OutputConfig, RayConfig, RunConfig)
from llmrec.serving.engine import engine_config
from llmrec.tracking import TrackingConfig

# execution keys that place the subject's engine: one value for the whole suite
ENGINE_PLACEMENT = ("mode", "concurrency", "num_cpus_per_worker", "num_gpus_per_worker", "max_restarts")
RUN_SECTIONS = ("benchmark", "judge", "data", "execution")  # what an entry takes from a run config file


RANKERS = ({"model": {"name": "mostpop"}}, {"model": {"name": "bm25"}},
           {"model": {"name": "bprmf", "embedding_size": 64}})
RANKER_TRAIN = {"epochs": 5, "batch_size": 2048, "learning_rate": 0.001, "patience": 3, "metric": "ndcg@10",
                "eval": {"topk": [5, 10]}}


class EntryBaselines(StrictModel):
    """Trained recommenders ranking an entry's own candidates (benchmarks that declare ``ranking_baselines``),
    each trained through ``llmrec train``'s path on the benchmark's interactions (leave-one-out)."""

    models: list[ModelEntry] = Field(default_factory=lambda: [ModelEntry.model_validate(m) for m in RANKERS],
                                     description="the baselines (as in `llmrec baselines rank`: model, run_dir, "
                                                 "label, train, history_cut); [] for none")
    train: dict[str, Any] = Field(default_factory=lambda: dict(RANKER_TRAIN),
                                  description="the train section every model shares (a model's own `train` "
                                              "overrides the whole train config, e.g. {train: {epochs: 3}})")

    def train_base(self, data: dict, filters: dict, tracking: dict | None = None, out_dir: str = "-") -> dict:
        """The `llmrec train` config each model starts from: leave-one-out on the benchmark's data (so the
        target each sample asks for is held out), this section's train settings, runs under ``out_dir``."""
        return {"data": data, "filters": filters, "split": {"protocol": "loo"}, "train": self.train,
                **({"tracking": tracking} if tracking is not None else {}),
                "output": {"dir": out_dir, "export_topk": 0, "export_embeddings": False}}


class SuiteEntry(StrictModel):
    """One benchmark of the suite (a run config fragment). Given as a path (``- configs/x.yaml``) or with a
    ``config: PATH`` key, it starts from that run config's benchmark/judge/data/execution sections (its
    engine, output, tracking and ray are the suite's, and so are the execution keys that place the engine,
    ``ENGINE_PLACEMENT``), the entry's own keys merged over them."""

    entry: PathName | None = Field(None, description="the entry's name (its run folder, MLflow child run and "
                                                     "metric prefix); default: the benchmark's name")
    benchmark: dict[str, Any] = Field(description="benchmark section, as in a run config")
    judge: dict[str, Any] | None = Field(None, description="judge engine section, for judged benchmarks")
    data: dict[str, Any] = Field(default_factory=dict, description="data section, as in a run config")
    execution: dict[str, Any] = Field(default_factory=dict,
                                      description="per-benchmark execution keys over the suite's (batch_size, "
                                                  "retries, judge_replicas, ...)")
    baselines: EntryBaselines = Field(default_factory=EntryBaselines,
                                      description="trained baselines on this entry's candidates, for benchmarks "
                                                  "that rank candidates (default: MostPop, BM25, BPRMF, 5 epochs)")

    @property
    def name(self) -> str:
        return self.entry or re.sub(r"[^\w.-]+", "_", str(self.benchmark["name"]))


class SuiteOutput(OutputConfig):
    @model_validator(mode="after")
    def _no_run_name(self) -> "SuiteOutput":
        if self.run_name is not None:
            raise ValueError("a suite names its runs <suite>/<subject>/<entry>; remove output.run_name")
        return self


class SuiteConfig(StrictModel):
    """Subjects × benchmark entries, with the sections every run of the suite shares."""

    name: PathName = Field(description="suite name: its folder under output.dir and its MLflow experiment")
    subjects: dict[PathName, dict[str, Any]] = Field(min_length=1, description="subject name → engine section")
    benchmarks: list[SuiteEntry] = Field(min_length=1, description="benchmark entries")
    baselines: bool = Field(True, description="also score each benchmark's traditional baselines (when it has any) "
                                              "on the same samples, as entries of kind 'baseline'")
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    output: SuiteOutput = Field(default_factory=SuiteOutput)

    @model_validator(mode="after")
    def _unique_entries(self) -> "SuiteConfig":
        seen: dict[str, int] = {}
        for i, e in enumerate(self.benchmarks):
            if e.name in seen:
                raise ValueError(f"benchmarks[{seen[e.name]}] and benchmarks[{i}] are both entry '{e.name}'; "
                                 "give one an `entry:` name")
            seen[e.name] = i
        return self

    def entry_names(self) -> list[str]:
        return [e.name for e in self.benchmarks]

    def run_config(self, subject: str, entry: SuiteEntry) -> RunConfig:
        """The ordinary run config of one (subject, entry): run directory <output.dir>/<suite>/<subject>/<entry>."""
        ex = ExecutionConfig.model_validate({**self.execution.model_dump(), **entry.execution})
        out = self.output.model_copy(update={"dir": f"{self.output.dir.rstrip('/')}/{self.name}/{subject}",
                                             "run_name": entry.name})
        if self.output.cache_path is None and not storage.is_uri(self.output.dir):
            # one request cache for the suite, beside it (keyed by engine identity: subjects never mix)
            out = out.model_copy(update={"cache_path": Path(self.output.dir) / "request_cache.sqlite"})
        tracking = self.tracking.model_copy(update={"experiment": self.tracking.experiment or self.name})
        return RunConfig.model_validate({
            "benchmark": benchmark_config(entry.benchmark), "engine": engine_config(self.subjects[subject]),
            "judge": engine_config(entry.judge, "judge") if entry.judge is not None else None,
            "data": DataConfig.model_validate(entry.data), "execution": ex, "ray": self.ray,
            "tracking": tracking, "output": OutputConfig.model_validate(out.model_dump())})


def _inline(raw: dict, path: Path) -> dict:
    """Entries given as a run config path (a string, or ``config:``) become inline fragments."""
    entries = raw.get("benchmarks")
    if not isinstance(entries, list):
        return raw
    out = []
    for i, e in enumerate(entries):
        e = {"config": e} if isinstance(e, str) else e
        if isinstance(e, dict) and e.get("config") is not None:
            try:
                base = read_yaml(e["config"])
            except ConfigError as err:
                raise ConfigError(f"{path}: benchmarks[{i}].config: {err}") from err
            merged = {k: base[k] for k in RUN_SECTIONS if base.get(k) is not None}
            if isinstance(merged.get("execution"), dict):  # the file's engine placement is the suite's here
                merged["execution"] = {k: v for k, v in merged["execution"].items() if k not in ENGINE_PLACEMENT}
            for k, v in e.items():
                if k == "config":
                    continue
                both = isinstance(v, dict) and isinstance(merged.get(k), dict)
                merged[k] = {**merged[k], **v} if both else v
            e = merged
        out.append(e)
    return {**raw, "benchmarks": out}


def _check_entry(cfg: SuiteConfig, i: int, e: SuiteEntry) -> None:
    where = f"benchmarks[{i}]"
    benchmark_config(e.benchmark, f"{where}.benchmark")
    if e.judge is not None:
        engine_config(e.judge, f"{where}.judge")
    validate(DataConfig, e.data, f"{where}.data")
    validate(ExecutionConfig, {**cfg.execution.model_dump(), **e.execution}, f"{where}.execution")  # names the key
    for key in ENGINE_PLACEMENT:
        if key in e.execution and e.execution[key] != getattr(cfg.execution, key):
            raise ConfigError(f"'{where}.execution.{key}' is {e.execution[key]!r} but the suite's execution.{key} "
                              f"is {getattr(cfg.execution, key)!r}: each subject's engine is started once for "
                              f"the whole suite; remove the key from the entry, or set it for the suite "
                              f"(execution.{key}, or --set execution.{key}={e.execution[key]!r})")
    _check_rankers(e, where)
    for subject in cfg.subjects:
        try:
            cfg.run_config(subject, e)
        except ConfigError as err:
            raise ConfigError(f"{where} (entry '{e.name}') with subject '{subject}': {err}") from err
        except ValueError as err:  # a cross-section check of RunConfig (e.g. GPU placement)
            raise ConfigError(f"{where} (entry '{e.name}') with subject '{subject}': {err}") from err


def _check_rankers(e: SuiteEntry, where: str) -> None:
    """``baselines`` only where the benchmark ranks candidates; each model's train config valid before any work."""
    from llmrec.pipelines.baselines.rank import train_config
    from llmrec.tuning.config import TrainConfig

    if "baselines" not in e.model_fields_set:
        return
    if caps.ranking_baselines(get_benchmark(str(e.benchmark["name"]))) is None:
        raise ConfigError(f"'{where}.baselines': benchmark {e.benchmark['name']} has no candidates that trained "
                          "recommenders could rank; remove the key")
    for j, m in enumerate(e.baselines.models):
        if m.model is not None:
            base = e.baselines.train_base({"format": "csv", "path": "-"}, {})  # the benchmark's data comes later
            try:
                validate(TrainConfig, train_config(base, m))
            except ConfigError as err:
                raise ConfigError(f"'{where}.baselines.models[{j}]': {err}") from err


def load_suite_config(path: str | Path, overrides: list[str] | None = None) -> SuiteConfig:
    """Read, override (``--set subjects.a.n_ctx=4096``), inline path entries and validate every
    (subject, entry) run config; any error names the file and the key."""
    path = Path(path)
    return suite_from_raw(_inline(apply_overrides(_entries_as_mappings(read_yaml(path)), overrides), path), str(path))


def _entries_as_mappings(raw: dict) -> dict:
    """``- configs/x.yaml`` entries as ``{config: configs/x.yaml}``, so that ``--set benchmarks.0.execution.…``
    addresses a path entry too."""
    entries = raw.get("benchmarks")
    if not isinstance(entries, list):
        return raw
    return {**raw, "benchmarks": [{"config": e} if isinstance(e, str) else e for e in entries]}


def suite_from_raw(raw: dict, path: str) -> SuiteConfig:
    """A suite mapping whose entries are inline (see :func:`load_suite_config`), validated; errors name ``path``."""
    try:
        cfg = validate(SuiteConfig, raw)
        for name, section in cfg.subjects.items():
            engine_config(section, f"subjects.{name}")
        for i, e in enumerate(cfg.benchmarks):
            _check_entry(cfg, i, e)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from err
    return cfg


def is_suite_file(raw: dict) -> bool:
    """Whether a config mapping is a suite (it has ``subjects:``), not a run config."""
    return "subjects" in raw


INDEX = SuiteDir.INDEX


class IndexEntry(BaseModel):
    """One entry of ``suite.json``: a (subject, benchmark entry) result and its run directory."""

    model_config = ConfigDict(extra="ignore")

    subject: str
    benchmark: str
    entry: str
    kind: Literal["llm", "baseline"]
    run_dir: str
    headline: list[str] = []
    mlflow_run_id: str | None = None


class SuiteIndexFile(BaseModel):
    """``suite.json`` as the verbs that read results see it (unknown keys are ignored)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    subjects: list[str] = []
    entries: list[IndexEntry]


def read_index(suite_dir: "str | Path | SuiteDir") -> tuple[SuiteIndexFile, list[tuple[IndexEntry, RunDir]]]:
    """A suite directory's index (``SuiteDir.INDEX``), checked, with each entry's run directory (a relative one is
    taken relative to the suite directory when it exists there; a copied suite's entries are found at
    ``<suite>/<subject>/<entry>``). Used by leaderboard, compare, report. Benchmark names are plain strings here:
    nothing they name is imported."""
    import json

    suite = SuiteDir(suite_dir)
    where = f"{suite.uri}/{SuiteDir.INDEX}"
    try:
        index = SuiteIndexFile.model_validate(json.loads(suite.index_text()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{where}: cannot read it as JSON ({e})") from e
    except ValidationError as e:
        first = e.errors()[0]
        raise ConfigError(f"{where}: {'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from e
    out = [(e, suite.run_dir(e.run_dir, e.subject, e.entry)) for e in index.entries]
    _check_entries(where, out)
    return index, out


def _check_entries(where: str, entries: list[tuple[IndexEntry, RunDir]]) -> None:
    """Each (subject, entry) listed once (a second listing would count one result twice: two leaderboard rows,
    a run compared with itself), and each entry's run directory a run of the benchmark the entry names (its
    config, where it has one; read as plain YAML, nothing imported)."""
    from llmrec.errors import DataError

    seen: dict[tuple[str, str], int] = {}
    for i, (e, rd) in enumerate(entries):
        key = (e.subject, e.entry)
        if key in seen:
            raise ConfigError(f"{where}: entries.{i} lists subject '{e.subject}', entry '{e.entry}' again (as "
                              f"entries.{seen[key]} does); each subject and entry is listed once: remove one")
        seen[key] = i
        try:
            ran = rd.benchmark_name() if rd.has_config() else None
        except (DataError, OSError):  # an unreadable config: the verb reading the run says so
            ran = None
        if ran is not None and ran != e.benchmark:
            raise ConfigError(f"{where}: entries.{i} (subject '{e.subject}', entry '{e.entry}') names benchmark "
                              f"'{e.benchmark}', but its run directory {rd.uri} is a run of '{ran}' "
                              f"({RunDir.CONFIG}); point the entry at a run of '{e.benchmark}'")
