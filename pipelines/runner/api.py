"""run_evaluation: plan → stream through Ray → aggregate → files → MLflow."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.common.plotting import left_out_file
from llmrec.pipelines.runner.budget import budget_stop
from llmrec.pipelines.runner.cost import RunCost
from llmrec.pipelines.runner.failures import FailureSummary, summarize_failures
from llmrec.pipelines.runner.report import complete, log_mlflow, staging_dir, write_outputs
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.execution import Progress, RunPlan, collect, invocation_stats, plan, stream
from llmrec.pipelines.runner.preflight import check_before_work
from llmrec.pipelines.runner.provision import SharedSubject
from llmrec.rundir import RunDir
from llmrec.storage import storage_errors

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    run_dir: Path | str  # a local folder, or the storage URI of the run directory
    metrics: dict[str, float]
    stats: dict[str, float]
    mlflow_run_id: str | None
    failures: FailureSummary  # decides `llmrec run`'s exit code
    files: dict[str, Path] = field(default_factory=dict)
    headline: tuple[str, ...] = ()  # the benchmark's headline metric keys (what a summary shows first)
    cost: dict[str, float] = field(default_factory=dict)  # the cost ledger (cost/ keys, also in RunDir.METRICS)
    judged: tuple[str, ...] = ()  # the headline metrics a judge decides (shown with the judge failure rate)
    stop_line: str = ""  # execution.stop_when: the decision, in one line


def run_evaluation(cfg: RunConfig, data_dir: Path | None = None, progress: Progress | None = None, *,
                   subject: SharedSubject | None = None, title: str | None = None,
                   parent_run_id: str | None = None, prepare: Callable[[RunPlan], None] | None = None) -> RunOutcome:
    """One run. A suite passes ``subject`` (its subject engine, started once and shared by its runs),
    ``title`` (the MLflow run name) and ``parent_run_id`` (the subject's MLflow run). ``prepare(plan)``: amends the
    plan before anything is sent (`llmrec rejudge` puts the stored subject outputs in its samples)."""
    started = time.time()
    if subject is None:  # a suite checks all its runs before its first one
        check_before_work([cfg])
    p = plan(cfg, data_dir)
    with p.hold:  # the run directory is this process's until the run ends, however it ends
        return _run(p, cfg, data_dir, progress, subject, title, parent_run_id, prepare, started)


def _run(p: RunPlan, cfg: RunConfig, data_dir: Path | None, progress: Progress | None, subject: SharedSubject | None,
         title: str | None, parent_run_id: str | None, prepare: Callable[[RunPlan], None] | None,
         started: float) -> RunOutcome:
    if prepare is not None:
        prepare(p)
    if cfg.execution.stop_when is not None:
        _plan_stop(p, cfg)
    log.info("%s: %d samples, %d already in the store, %d to run", p.run_dir, len(p.samples),
             len(p.samples) - len(p.pending), len(p.pending))
    books = RunCost(p, shared_subject=subject is not None)
    p.budget = books.budget(cfg.execution.budget)
    done = len(p.samples) - len(p.pending)
    if p.budget is not None and p.pending and p.budget.reached():  # spent already: nothing starts
        raise budget_stop(p.budget, done, len(p.samples))
    fresh = stream(p, progress, subject)
    books.record(p.timings)
    if p.budget is not None and p.budget.stopped and len(fresh) < len(p.pending):
        raise budget_stop(p.budget, done + len(fresh), len(p.samples))
    t0 = time.perf_counter()
    rows = collect(p)
    metrics = caps.aggregate(p.bench, cfg.benchmark, rows, p.assets)
    cost = books.ledger(len(rows))  # the whole run's cost/ keys: written and logged beside the metrics
    stop_line = ""
    if p.stop is not None:  # complete-but-early: the decision, its bounds, the share used, what was not spent
        metrics.update(p.stop.metrics(len(rows), len(p.samples)))
        cost.update(unspent(cost, len(rows), len(p.samples)))
        stop_line = p.stop.line(len(rows), len(p.samples))
    t1 = time.perf_counter()
    stats = {**invocation_stats(fresh), "samples_resumed": float(len(p.samples) - len(p.pending)),
             "samples_new": float(len(fresh))}
    with staging_dir(p) as writer:  # a remote run's working folder is removed once the run is logged
        files = write_outputs(p, rows, {**metrics, **cost}, writer)
        t2 = time.perf_counter()
        plots_dir = writer.file(RunDir.PLOTS)
        (plots_dir / RunDir.PLOTS_LEFT_OUT).unlink(missing_ok=True)  # a resumed run decides again
        with storage_errors(str(plots_dir), "write the plots"):  # a full disk: one line naming the folder
            plots = caps.plots(p.bench, cfg.benchmark, rows, plots_dir, p.assets) if rows else []
        plots = [*plots, *[f for f in left_out_file(plots_dir) if f not in plots]]  # why a figure is missing
        t3 = time.perf_counter()
        complete(writer, files, {**metrics, **cost})  # the metrics last: the run directory is complete
        p.timings.update(time_aggregate_s=t1 - t0, time_outputs_s=time.perf_counter() - t3 + t2 - t1,
                         time_plots_s=t3 - t2)
        stats.update(p.timings)  # seconds per phase, logged with the run (the MLflow phase itself is not in them)
        run_id = log_mlflow(p, rows, {**metrics, **cost}, files, plots, stats, started, title, parent_run_id)
    return RunOutcome(p.run_dir.local_path or p.run_dir.uri, metrics, stats, run_id, summarize_failures(rows), files,
                      caps.headline_metrics(p.bench), cost, tuple(caps.judged_metrics(p.bench)), stop_line)


UNSPENT = ("prompt_tokens", "completion_tokens", "engine_seconds", "usd")


def unspent(cost: dict[str, float], used: int, total: int) -> dict[str, float]:
    """``cost/unspent/<key>``: what the samples an early stop left out would have cost, estimated from the samples
    run (their mean cost per sample times the samples left)."""
    if not used or used >= total:
        return {f"cost/unspent/{k}": 0.0 for k in UNSPENT if f"cost/{k}" in cost}
    return {f"cost/unspent/{k}": cost[f"cost/{k}"] / used * (total - used) for k in UNSPENT if f"cost/{k}" in cost}


def _plan_stop(p: RunPlan, cfg: RunConfig) -> None:
    """execution.stop_when: the baseline's outcomes, the clusters' order (pending samples sorted by it) and the
    sequence over what the store holds already (a resumed run may be decided before anything is sent)."""
    from llmrec.pipelines.runner.stop_when import EarlyStop, baseline_location, baseline_outcomes, ordered

    sw = cfg.execution.stop_when
    entry = caps.entry_label(p.bench, cfg.benchmark.model_dump(mode="json"))
    location = baseline_location(sw, cfg.tracking.uri, entry)
    base = baseline_outcomes(p.bench, cfg.benchmark, p.assets, location, sw.metric)
    p.stop = EarlyStop.build(sw, p.bench, cfg.benchmark, p.assets, p.samples, base)
    pending = {str(s["sample_id"]) for s in p.pending}
    stored = p.store.load()
    if p.stop.update([stored[str(s["sample_id"])] for s in p.samples
                      if str(s["sample_id"]) not in pending and str(s["sample_id"]) in stored]):
        p.pending = []  # decided by what was stored: nothing more to send
    else:
        p.pending = ordered(p.bench, p.pending, p.stop.order)
