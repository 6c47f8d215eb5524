"""`llmrec suite`: every benchmark entry for every subject, one engine start per subject.

For each subject the engine is started once (``provision.SharedSubject``: an engine-actor pool in
actors mode, one Serve app in serve mode) when its first run has samples to send, handed to
every run of that subject, and stopped after its last. Each (subject, entry) is an ordinary run
(``run_evaluation``) with its own run directory ``<output.dir>/<suite>/<subject>/<entry>/`` and
result store, so a killed suite resumes like a run: finished entries send nothing (their engine
is not even started), a half-done entry sends its missing samples.

Benchmarks with traditional baselines get entries of kind ``baseline`` at ``<suite>/<label>/<entry>/``
(metrics, samples, predictions: ``RunDir``): model-free ones (``HasBaselines.baselines``), and for a
benchmark that ranks candidates (``HasBaselines.ranking_baselines``) the recommenders the entry names
(``baselines.models``), trained through ``llmrec train``'s path under ``<suite>/<label>/<entry>/train/`` and
ranking the same samples' candidates. A re-run does not train again a baseline whose result exists.

``<output.dir>/<suite>/suite.json`` (``SuiteDir.INDEX``) indexes every entry written so far (merged across
invocations, e.g. ``--subject``)::

    {"name": str, "subjects": [str],
     "entries": [{"subject", "benchmark", "entry", "kind": "llm"|"baseline", "run_dir",
                  "headline": [metric keys], "mlflow_run_id"}]}

``run_dir`` is the run directory as an absolute path (or storage URI).

MLflow (experiment ``tracking.experiment``, default the suite's name): one parent run per subject
(``<subject> · <suite>``) carrying the engine params that tell the subjects apart (``tracking.subject_params``),
the protocol of every entry (tag ``protocol``) and each entry's headline metrics with their CI bounds as
``<entry>.<metric>`` / ``<entry>.<metric>_ci_low`` / ``_ci_high``; a child per entry (``<entry> · <subject>``),
and the per-setting runs below that. The experiment's shared view shows the first headline metric of every
entry with its CI bounds, in suite order, then the other headline metrics, then those params.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from llmrec import storage, tracking
from llmrec.config import fingerprint
from llmrec.errors import ConfigError, LlmrecError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.baselines.config import ModelEntry
from llmrec.pipelines.protocol import Benchmark, RankingBaselines, protocol_record
from llmrec.pipelines.runner import judge_failures
from llmrec.pipelines.runner.api import RunOutcome, run_evaluation
from llmrec.pipelines.runner.execution import Progress, RunPlan, build_samples, data_root
from llmrec.pipelines.runner.provision import SharedSubject
from llmrec.pipelines.runner.report import bound_run, complete, staging_dir, write_outputs
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.suite_config import SuiteConfig, SuiteEntry
from llmrec.rundir import RunDir, SuiteDir

log = logging.getLogger(__name__)

ProgressFor = Callable[[str, str], Progress]  # (subject, entry) → the progress callback of that run


@dataclass
class SuiteOutcome:
    suite_dir: str
    index: dict  # the suite.json written
    metrics: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)  # (subject, entry) → metrics
    engine_start_s: dict[str, float] = field(default_factory=dict)  # subject → seconds (absent: not started)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)  # (subject, entry) → what went wrong
    seconds: float = 0.0


def suite_dir(cfg: SuiteConfig) -> storage.Storage:
    return storage.Storage(storage.resolve(cfg.output.dir)) / cfg.name


class SuiteIndex:
    """``suite.json``: read at start (entries of earlier invocations are kept), rewritten after every entry."""

    def __init__(self, where: storage.Storage, name: str):
        self.where = SuiteDir(where)
        old = json.loads(self.where.index_text()) if SuiteDir.is_suite(where) else {}
        self.data = {"name": name, "subjects": list(old.get("subjects", [])), "entries": list(old.get("entries", []))}

    def add(self, subject: str, benchmark: str, entry: str, kind: str, run_dir: str, headline: list[str],
            run_id: str | None) -> None:
        if kind == "llm" and subject not in self.data["subjects"]:
            self.data["subjects"].append(subject)
        rec = {"subject": subject, "benchmark": benchmark, "entry": entry, "kind": kind, "run_dir": run_dir,
               "headline": headline, "mlflow_run_id": run_id}
        rows = self.data["entries"]
        at = next((i for i, e in enumerate(rows) if (e["subject"], e["entry"]) == (subject, entry)), None)
        if at is None:
            rows.append(rec)
        else:
            rows[at] = rec
        self.where.write_index(self.data)


class SubjectRun:
    """The MLflow parent run of one subject (or baseline label): created on first use, its id kept in
    ``<suite>/<subject>/mlflow_run_id`` so a resumed suite logs to the same run."""

    def __init__(self, cfg: SuiteConfig, subject: str, kind: str, model: str, params: dict[str, str] | None = None,
                 protocol: dict | None = None):
        self.cfg, self.subject, self.kind, self.model = cfg, subject, kind, model
        self.params, self.protocol = params or {}, protocol
        self.folder = suite_dir(cfg) / subject
        self.run_id: str | None = None
        self.exp_id: str | None = None

    def open(self, started: float) -> str | None:
        tr = self.cfg.tracking
        if not tr.enabled:
            return None
        # the runs table opens on the subject × benchmark view: each entry's first headline metric as a
        # column (before the runs add their own), each subject's entries nested below it
        self.exp_id = tracking.setup(tr.uri, tr.experiment or self.cfg.name, tr.artifact_root, view_columns(self.cfg),
                                     tracking.view_params(suite_params(self.cfg)))
        client = tracking.client(tr.uri)
        self.run_id = bound_run(client, RunDir(self.folder).mlflow_run_id(), self.folder)  # a copied suite: its own
        tags = tracking.run_tags("suite" if self.kind == "llm" else "baseline", self.protocol, model=self.model, **{
            tracking.TAG_SUITE: self.cfg.name, tracking.TAG_SUBJECT: self.subject,
            tracking.TAG_RUN_LOCATION: self.folder.uri})
        name = subject_run_name(self.cfg.name, self.subject)
        if self.run_id is None:
            self.run_id = client.create_run(self.exp_id, start_time=int(started * 1000), tags=tags,
                                            run_name=name).info.run_id
            self.folder.mkdir()
            RunDir(self.folder).set_mlflow_run_id(self.run_id)
        else:
            client.update_run(self.run_id, status="RUNNING", name=name)
            for k, v in tags.items():
                client.set_tag(self.run_id, k, v)
        tracking.log_params(client, self.run_id, self.params)
        return self.run_id

    def log_entry(self, entry: str, metrics: dict, headline: list[str]) -> None:
        """The entry's headline metrics and their CI bounds on the parent as ``<entry>.<metric>[_ci_low|_ci_high]``."""
        if self.run_id is None:
            return
        tracking.log_metrics(tracking.client(self.cfg.tracking.uri), self.run_id,
                             {f"{entry}.{h}{s}": metrics[f"{h}{s}"] for h in headline for s in CI_SUFFIXES
                              if f"{h}{s}" in metrics})

    def close(self, failed: bool = False, stats: dict | None = None) -> None:
        if self.run_id is None:
            return
        client = tracking.client(self.cfg.tracking.uri)
        if stats:
            tracking.log_metrics(client, self.run_id, stats)
        client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED", end_time=int(time.time() * 1000))


CI_SUFFIXES = ("", "_ci_low", "_ci_high")


def subject_run_name(suite: str, subject: str) -> str:
    """A subject's MLflow run: what differs between the experiment's runs (the subject) first."""
    return f"{subject} · {suite}"


def entry_run_name(subject: str, entry: str) -> str:
    """An entry's MLflow run below its subject: the entry first (``prefeval · gemma-grammar``)."""
    return f"{entry} · {subject}"


def view_columns(cfg: SuiteConfig) -> list[str]:
    """The suite's metric columns, in suite order: each entry's first headline metric with its CI bounds
    (``<entry>.<metric>``, ``…_ci_low``, ``…_ci_high``), then the entries' other headline metrics (counts such as
    ``failed`` left out: the leaderboard shows them)."""
    from llmrec.pipelines.registry import get_benchmark

    heads = [(e.name, [h for h in caps.headline_metrics(get_benchmark(str(e.benchmark["name"])))
                       if not tracking.is_count(h)]) for e in cfg.benchmarks]
    first = [f"{name}.{h[0]}{s}" for name, h in heads if h for s in CI_SUFFIXES]
    return first + [f"{name}.{m}" for name, h in heads for m in h[1:]]


def suite_params(cfg: SuiteConfig) -> dict[str, dict[str, str]]:
    """subject → the engine params of its MLflow run (``tracking.subject_params`` over the validated engine
    sections, so defaults count: an option one subject sets to its default does not differ)."""
    engines = {s: cfg.run_config(s, cfg.benchmarks[0]).engine.model_dump(mode="json") for s in cfg.subjects}
    return tracking.subject_params(engines)


def suite_protocol(cfg: SuiteConfig, subject: str) -> dict:
    """entry → the protocol record of the subject's run of it (the settings that define the numbers)."""
    from llmrec.pipelines.registry import get_benchmark

    out = {}
    for e in cfg.benchmarks:
        rc = cfg.run_config(subject, e)
        out[e.name] = protocol_record(get_benchmark(rc.benchmark.name), rc.benchmark)
    return out


def headline_of(headline: tuple[str, ...], metrics: dict) -> list[str]:
    """The declared headline metric keys that the metrics hold."""
    return [h for h in headline if h in metrics]


def _run_subject(cfg: SuiteConfig, subject: str, data_dir: Path | None, progress: ProgressFor | None,
                 index: SuiteIndex, out: SuiteOutcome) -> None:
    first = cfg.run_config(subject, cfg.benchmarks[0])  # the subject's engine section, validated and completed
    shared = SharedSubject(first.engine, cfg.execution, cfg.ray, f"{cfg.name}-{subject}")
    parent = SubjectRun(cfg, subject, "llm", tracking.model_label(first.engine), suite_params(cfg)[subject],
                        suite_protocol(cfg, subject))
    parent_id = parent.open(time.time())
    failed = False
    try:
        for entry in cfg.benchmarks:
            try:
                outcome = run_evaluation(cfg.run_config(subject, entry), data_dir,
                                         progress(subject, entry.name) if progress else None, subject=shared,
                                         title=entry_run_name(subject, entry.name), parent_run_id=parent_id)
            except LlmrecError as e:  # this entry's config or data: the other entries go on
                log.error("suite %s: %s × %s failed: %s", cfg.name, subject, entry.name, e)
                out.errors[(subject, entry.name)] = str(e)
                failed = True
                continue
            _record(cfg, subject, entry, outcome, index, parent, out)
    finally:
        shared.stop()
        if shared.start_s is not None:
            out.engine_start_s[subject] = shared.start_s
        parent.close(failed, {"time_engine_start_s": shared.start_s} if shared.start_s is not None else None)


def _record(cfg: SuiteConfig, subject: str, entry: SuiteEntry, outcome: RunOutcome, index: SuiteIndex,
            parent: SubjectRun, out: SuiteOutcome) -> None:
    heads = headline_of(outcome.headline, outcome.metrics)
    index.add(subject, str(entry.benchmark["name"]), entry.name, "llm", str(outcome.run_dir), heads,
              outcome.mlflow_run_id)
    parent.log_entry(entry.name, outcome.metrics, heads + [k for k in judge_failures.pinned(outcome.judged)
                                                          if k in outcome.metrics])
    out.metrics[(subject, entry.name)] = outcome.metrics
    problems = []
    if outcome.failures.exceeds(cfg.execution.max_failed_share):
        problems.append(outcome.failures.describe(cfg.execution.max_failed_share))
    over = judge_failures.too_many(outcome.metrics, cfg.execution.max_judge_failed_share) if outcome.judged else []
    if over:
        problems.append(judge_failures.describe(over, cfg.execution.max_judge_failed_share, outcome.judged))
    if problems:
        out.errors[(subject, entry.name)] = "; ".join(problems)


BASELINE_KEY = "baseline_key"  # in a baseline's run directory, just before its metrics: what its result was computed from

Producer = tuple[str, Callable[[], list[dict]]]  # (fingerprint of what the rows depend on, rows)


def _baseline_producers(cfg: SuiteConfig, entry: SuiteEntry, rc: RunConfig, bench: Benchmark, samples: list[dict],
                        assets: dict | None, data_dir: Path | None) -> dict[str, Producer]:
    """label → producer of one entry's baselines: the benchmark's model-free ones (``baselines``), and for a
    benchmark that ranks candidates (``ranking_baselines``) the entry's trained recommenders, trained only
    when their rows are asked for."""
    same = [protocol_record(bench, rc.benchmark), [s["sample_id"] for s in samples]]
    out: dict[str, Producer] = {}
    free, trained = caps.baselines(bench), caps.ranking_baselines(bench)
    for label, rows in (free(rc.benchmark, samples, assets) if free else {}).items():
        out[label] = (fingerprint(same, 16), lambda rows=rows: rows)
    ranking = trained(rc.benchmark, samples, assets) if trained else None
    if ranking is None or not entry.baselines.models:
        return out
    from llmrec.pipelines.baselines.rank import entry_label

    data = {"dir": str(data_root(rc, bench, data_dir)), **ranking.data}
    for m in entry.baselines.models:
        label = entry_label(m)
        if label in out:
            raise ConfigError(f"suite {cfg.name}: entry '{entry.name}' has two baselines labelled '{label}'; "
                              "give one a `label:`")
        where = suite_dir(cfg) / label / entry.name
        base = entry.baselines.train_base(
            data, ranking.filters, rc.tracking.model_copy(update={"experiment": "llmrec-baselines"}).model_dump(
                mode="json"), str(where / "train"))
        out[label] = (fingerprint([same, m.model_dump(mode="json"), entry.baselines.train], 16),
                      partial(_trained_rows, ranking, base, where, m))
    return out


def _trained_rows(ranking: RankingBaselines, base: dict, where: storage.Storage, m: ModelEntry) -> list[dict]:
    """Train (or read) the model ``m`` on ``base`` (its run under ``where/train``) and rank the samples with it."""
    from llmrec.pipelines.baselines.rank import trained_ranker

    local = (where.local_path or Path(tempfile.mkdtemp(prefix=f"llmrec-{where.name}-"))) / "train"
    return ranking.rows(trained_ranker(base, local, m))


def _stored_metrics(run_dir: storage.Storage, key: str) -> dict | None:
    """A baseline's metrics when its run directory holds a result computed from ``key``."""
    stored = RunDir(run_dir)
    if stored.has_metrics() and run_dir.exists(BASELINE_KEY) and run_dir.read_text(BASELINE_KEY).strip() == key:
        return stored.metrics()
    return None


def _run_baselines(cfg: SuiteConfig, data_dir: Path | None, index: SuiteIndex, out: SuiteOutcome) -> None:
    """Each benchmark's traditional baselines on the same samples (no engine), under ``<suite>/<label>/<entry>``
    (metrics, samples, predictions). A re-run (``output.resume``) reads the results of
    baselines computed from the same benchmark config, samples and model settings instead of training again."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.run_config import absolute_locations

    runs: dict[str, SubjectRun] = {}
    subject = next(iter(cfg.subjects))
    for entry in cfg.benchmarks:
        rc = absolute_locations(cfg.run_config(subject, entry))
        found = get_benchmark(rc.benchmark.name)
        if caps.baselines(found) is None and (caps.ranking_baselines(found) is None or not entry.baselines.models):
            continue
        bench, samples, assets = build_samples(rc, data_dir)
        producers = _baseline_producers(cfg, entry, rc, bench, samples, assets, data_dir)
        for label, (key, make_rows) in producers.items():
            if label in cfg.subjects:
                raise ConfigError(f"suite {cfg.name}: subject '{label}' has the name of a {bench.name} baseline; "
                                  "rename the subject")
            run_dir = suite_dir(cfg) / label / entry.name
            metrics = _stored_metrics(run_dir, key) if rc.output.resume else None
            if metrics is None:
                run_dir.mkdir()
                rows = make_rows()
                p = RunPlan(rc, bench, rows, run_dir, None, [], assets)
                metrics = caps.aggregate(bench, rc.benchmark, rows, assets)
                with staging_dir(p) as writer:
                    files = write_outputs(p, rows, metrics, writer)
                    writer.write_text(BASELINE_KEY, key + "\n", publish=False)
                    complete(writer, files, metrics)
            else:
                log.info("suite %s: baseline %s × %s: results exist, not computed again", cfg.name, label, entry.name)
            if label not in runs:
                runs[label] = SubjectRun(cfg, label, "baseline", label,
                                         {"engine.type": "baseline", "engine.model": label})
                runs[label].open(time.time())
            heads = headline_of(caps.headline_metrics(bench), metrics)
            runs[label].log_entry(entry.name, metrics, heads)
            index.add(label, str(entry.benchmark["name"]), entry.name, "baseline", str(run_dir), heads,
                      runs[label].run_id)
            out.metrics[(label, entry.name)] = metrics
    for run in runs.values():
        run.close()


def _discard_entries(cfg: SuiteConfig, only: list[str] | None) -> None:
    from llmrec.pipelines.runner.execution import discard_results, run_dir_for
    from llmrec.pipelines.runner.run_config import absolute_locations

    for s in only or list(cfg.subjects):
        for e in cfg.benchmarks:
            rd = RunDir(run_dir_for(absolute_locations(cfg.run_config(s, e))))
            if rd.path is not None and not rd.path.is_dir():
                continue
            with rd.writer():
                discard_results(rd)


def run_suite(cfg: SuiteConfig, data_dir: Path | None = None, only: list[str] | None = None,
              progress: ProgressFor | None = None) -> SuiteOutcome:
    """Run every entry for every subject (``only``: these subjects), then the baselines; write suite.json."""
    unknown = [s for s in only or [] if s not in cfg.subjects]
    if unknown:
        raise ConfigError(f"--subject {', '.join(unknown)}: not a subject of suite '{cfg.name}' "
                          f"(its subjects: {', '.join(cfg.subjects)})")
    t0 = time.perf_counter()
    from llmrec.pipelines.runner.preflight import check_before_work

    check_before_work([cfg.run_config(s, e) for s in only or list(cfg.subjects) for e in cfg.benchmarks])
    where = suite_dir(cfg)
    where.mkdir()
    if not cfg.output.resume:  # --fresh: every entry in scope starts over now, so an entry that stops or fails
        _discard_entries(cfg, only)  # later shows no earlier numbers
    index = SuiteIndex(where, cfg.name)
    out = SuiteOutcome(str(where), index.data)
    for subject in only or list(cfg.subjects):
        _run_subject(cfg, subject, data_dir, progress, index, out)
    if cfg.baselines:
        _run_baselines(cfg, data_dir, index, out)
    out.seconds = time.perf_counter() - t0
    return out
