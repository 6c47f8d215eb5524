"""The generic Ray Data runner. It knows the Benchmark protocol, never a benchmark.

prepare → samples (stable ids) and the run directory; the result store says which are
finished; the rest stream through one Ray Data actor pool whose actors hold the
engines (or clients of a Ray Serve deployment, or of the judge's own engine actors) and
run every stage per batch; each finished batch is written to the store as it arrives;
then metrics are aggregated.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from llmrec import settings, storage
from llmrec.config import dump_yaml, fingerprint
from llmrec.errors import ConfigError, DataError, EngineDead
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import Benchmark, BenchmarkConfig, Sample, check_stages, record_schema
from llmrec.pipelines.record import RecordError
from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.common.datasets import resolve_data_dir
from llmrec.pipelines.runner.run_config import (REQUEST_CACHE_FILE, RUN_FACTS_FILE, RunConfig, absolute_locations,
                                               config_conflicts, resume_conflicts)
from llmrec.pipelines.common.provenance import data_conflicts, data_fingerprint, named_paths, reads_recorded
from llmrec.pipelines.common.store import ResultStore
from llmrec.redact import redacted
from llmrec.rundir import RunDir
from llmrec.pipelines.runner.placement import actor_options_accepted, actor_resources
from llmrec.pipelines.runner.provision import RunEngines, app_name  # noqa: F401 - app_name: where callers found it
from llmrec.pipelines.runner.worker import (batch_texts, batch_timings, decode, encode, group_by_prefix, pack,
                                           process_samples)
from llmrec.serving.engine import engine_provenance, run_facts
from llmrec.transcripts import TextStore

if TYPE_CHECKING:
    from llmrec.types import Result
    from llmrec.pipelines.runner.budget import Budget
    from llmrec.pipelines.runner.stop_when import EarlyStop
    from llmrec.pipelines.runner.judges import JudgingSpec
    from llmrec.pipelines.runner.provision import SharedSubject

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (done, total)


class StageWorker:
    """Ray Data actor: holds the engines (or their clients) for its lifetime and runs all stages per batch.
    ``engines``: role → opener (``provision.Provision.client``); ``bench_cfg``: the validated config; ``cache``: the
    request cache service; ``run``: the run directory, recorded with the cache entries its calls write."""

    def __init__(self, bench_cfg: BenchmarkConfig, engines: dict, cache, retries: int, backoff_s: float,
                 assets: tuple = (), transcripts: bool = True, judging: JudgingSpec | None = None, run: str | None = None,
                 work: tuple[str, str] | None = None):
        import ray

        self.bench = get_benchmark(bench_cfg.name)
        self.cfg = bench_cfg
        self._openers, self._cache, self._run = engines, cache, run
        self._retries, self._backoff = retries, backoff_s
        self._engines: dict = {}
        self._load_s = 0.0  # engine start-up time not yet reported to the driver
        self._transcripts = transcripts  # collect every call's request reference and texts (output.transcripts)
        self._judging = judging  # pinned judge sampling, a jury, stages of a rejudge (runner.judges.judging_spec)
        self._work = work  # (run, invocation): whose engine work the request cache records (serving.cache.Work)
        # the benchmark's shared read-only assets: one object in the object store, fetched once per actor
        self._assets = ray.get(assets[0]) if assets else None

    def _engine(self, role: str):
        if role not in self._engines:
            opener = self._openers.get(role)
            if opener is None:
                raise ConfigError(f"benchmark stage needs a '{role}' engine; add a '{role}:' section to the config")
            t0 = time.perf_counter()
            from llmrec.serving.cache import Work

            by = Work(*self._work, role) if self._work is not None else self._run
            self._engines[role] = cached(opener(), self._cache, by)
            self._load_s += time.perf_counter() - t0
        return self._engines[role]

    def __call__(self, batch: dict) -> dict:
        t0 = time.perf_counter()
        self._worked()  # a batch that failed before handing its work over: it stays unsettled, counted as such
        groups = decode(batch)
        samples = [s for g in groups for s in g]
        texts: dict[str, str] | None = {} if self._transcripts else None
        try:
            process_samples(self.bench, self.cfg, samples, self._engine, self._retries, self._backoff, self._assets,
                            texts, self._judging)
        except EngineDead as e:
            # The engine (e.g. an engine's own core process) is gone and cannot be revived in this process.
            # Ending the process (not an exception, not ray.actor.exit_actor: both stop the run
            # or the restarts) lets Ray restart this actor (max_restarts) and re-run this batch
            # on it (max_task_retries), so the batch's samples are redone, not recorded failed.
            log.error("engine dead, restarting this actor: %s", e)
            os._exit(1)
        load, self._load_s = self._load_s, 0.0
        out = encode(groups, {"engine_start_s": load, "worker_s": time.perf_counter() - t0 - load}, texts)
        facts = {role: f for role, engine in self._engines.items() if (f := run_facts(engine))}
        out["facts"] = [json.dumps(facts)] * len(groups)  # what the engines learned so far (see run_facts)
        out["provenance"] = [json.dumps(self._engine_provenance()) if i == 0 else "{}" for i in range(len(groups))]
        # the request-cache keys of the engine work this batch holds: the driver settles them once it is stored
        worked = self._worked()
        out["work"] = [json.dumps(worked if i == 0 else []) for i in range(len(groups))]
        return out

    def _engine_provenance(self) -> dict[str, dict]:
        """Role → what its engine says produced its outputs (``engine_provenance``; asked after every batch: an engine
        says more once started, and its hook keeps what is costly to learn)."""
        return {role: prov for role, engine in self._engines.items() if (prov := engine_provenance(engine))}

    def _worked(self) -> list[str]:
        """The request-cache keys of the engine work done since the last call (``CachedEngine.take_worked``)."""
        return sorted({k for e in self._engines.values() if hasattr(e, "take_worked") for k in e.take_worked()})


def cached(engine, cache, by=None):
    """``engine`` wrapped by the run's request cache (``cache``: the cache service actor handle, or None; ``by``:
    whose engine calls these are, the run directory or its ``serving.cache.Work``: the writer of the entries)."""
    if cache is None:
        return engine
    from llmrec.serving.cache import CachedEngine
    from llmrec.serving.cache_service import RemoteRequestCache

    return CachedEngine(engine, RemoteRequestCache(cache), by)


def batch_work(batch: dict) -> list[str]:
    """The request-cache keys of the engine work a batch's rows hold (``StageWorker.__call__``)."""
    return sorted({k for w in batch.get("work", ()) for k in json.loads(w)})


@dataclass
class RunPlan:
    config: RunConfig
    bench: Benchmark
    samples: list[Sample]
    run_dir: storage.Storage  # local folder or storage URI
    store: ResultStore
    pending: list[Sample] = field(default_factory=list)
    assets: dict | None = None  # the benchmark's shared read-only data, read on the driver
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (``time_*`` stats)
    facts: dict[str, dict] = field(default_factory=dict)  # role → the engine's run_facts (RUN_FACTS_FILE)
    texts: TextStore | None = None  # the run's transcript texts (RunDir.transcripts)
    budget: "Budget | None" = None  # execution.budget (budget.py): consulted after each written batch
    stop: "EarlyStop | None" = None  # execution.stop_when (stop_when.py): updated after each written batch
    hold: ExitStack = field(default_factory=ExitStack)  # the run directory's writer lock (RunDir.writer): close it
    # when the run ends
    engines_provenance: dict[str, dict] = field(default_factory=dict)  # role → its engine's provenance (where it ran)


def run_dir_for(cfg: RunConfig) -> storage.Storage:
    bench = re.sub(r"[^\w.-]+", "_", cfg.benchmark.name)  # a "module:ATTR" plugin name is not a folder name
    name = cfg.output.run_name or f"{bench}-{fingerprint(cfg.semantic())}"
    return storage.Storage(cfg.output.dir) / name


def run_id(run_dir: storage.Storage) -> str:
    """What the request cache records as the writer of the entries a run's calls store: its directory (a URI without
    credentials)."""
    from llmrec.redact import redact_url

    uri = storage.Storage.of(run_dir).uri
    return redact_url(uri) if storage.is_uri(uri) else uri


def data_root(cfg: RunConfig, bench: Benchmark, data_dir: Path | None = None) -> Path:
    """The local data directory the benchmark reads (``data_dir``, else the config's; a URI is materialized)."""
    where = data_dir or cfg.data.dir
    if where is not None and storage.is_uri(where):
        where = storage.materialize(where, settings.cache_root())
    return resolve_data_dir(Path(where) if where is not None else None, caps.data(bench))


def build_samples(cfg: RunConfig, data_dir: Path | None = None) -> tuple[Benchmark, list[Sample], dict | None]:
    """The benchmark, its samples (unique ``sample_id``) and its shared assets, read on the driver."""
    bench = get_benchmark(cfg.benchmark.name)
    root = data_root(cfg, bench, data_dir)
    samples = bench.build_samples(cfg.benchmark, root)
    if not samples:  # e.g. an empty list of settings: a run of nothing would "succeed"
        raise ConfigError(f"benchmark '{bench.name}': the config selects 0 samples; check the benchmark section's "
                          "lists and limits")
    assets = caps.assets(bench, cfg.benchmark, root)
    schema = record_schema(bench)
    try:
        for s in samples:
            schema.check_built(s)
            s["setting"] = {k: s.get(k) for k in caps.group_keys(bench)}
    except RecordError as e:
        raise DataError(str(e)) from None
    ids = [str(s["sample_id"]) for s in samples]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"benchmark '{bench.name}' built duplicate sample_id {dup!r}")
    return bench, samples, assets


def plan(cfg: RunConfig, data_dir: Path | None = None) -> RunPlan:
    """The run's samples, its run directory and what is left to do. Stored results are resumed only when they
    were produced from this config and this data (see ``check_resumable``); anything else is refused."""
    t0 = time.perf_counter()
    cfg = absolute_locations(cfg)
    with reads_recorded() as read:
        bench, samples, assets = build_samples(cfg, data_dir)
    root = data_root(cfg, bench, data_dir)
    named = named_paths(cfg.benchmark.model_dump(mode="json"), root)
    provenance = {"config": redacted(cfg.semantic()), "data": data_fingerprint(read, root, named)}
    check_stages(bench, cfg.benchmark)
    run_dir = run_dir_for(cfg)
    run_dir.mkdir()
    rd = RunDir(run_dir)
    hold = ExitStack()
    hold.enter_context(rd.writer())  # one writer per run directory, from here to the end of the run
    try:
        return _plan(cfg, bench, samples, assets, provenance, rd, hold, t0)
    except BaseException:
        hold.close()
        raise


def _plan(cfg: RunConfig, bench: Benchmark, samples: list[Sample], assets: dict | None, provenance: dict, rd: RunDir,
          hold: ExitStack, t0: float) -> RunPlan:
    run_dir = rd.storage
    store = ResultStore(rd.results, provenance, record_schema(bench), writer=True)  # typed shards
    texts = TextStore(rd.transcripts)
    if not cfg.output.resume:  # --fresh
        discard_results(rd, store, texts)
    done = store.finished_ids()
    differ = check_resumable(cfg, rd, store, done)
    if differ and rd.mlflow_run_id() is not None:
        rd.drop_mlflow_run_id()  # another config: another MLflow run (params are write-once)
    rd.write_config(dump_yaml(cfg))
    pending = [s for s in samples if str(s["sample_id"]) not in done]
    facts = {}  # the engine facts behind the stored results: kept with them, dropped without them
    if rd.exists(RunDir.FACTS) and done:
        facts = rd.facts()
    elif rd.exists(RunDir.FACTS):
        rd.drop_facts()
    return RunPlan(cfg, bench, samples, run_dir, store, pending, assets, {"time_plan_s": time.perf_counter() - t0},
                   facts, texts, hold=hold)


def discard_results(rd: RunDir, store: ResultStore | None = None, texts: TextStore | None = None) -> None:
    """``--fresh``: the results, the transcripts they refer to and every file derived from them go together, before
    any work, so a run stopped before its end (a budget, a failure) leaves no earlier numbers for a reader to take
    as its own. The caller holds the run directory (``RunDir.writer``)."""
    (store or ResultStore(rd.results)).clear()
    (texts or TextStore(rd.transcripts)).clear()
    rd.drop_derived()


def check_resumable(cfg: RunConfig, rd: RunDir, store: ResultStore, done: set[str]) -> list[str]:
    """Refuse (ConfigError) stored finished results that were not produced from ``cfg`` and the data read now:
    results without the stored config (``RunDir.CONFIG``), a stored config whose result-determining keys differ, or a shard whose
    provenance (config and data fingerprint) differs or is missing (e.g. copied in from another run). Returns the
    keys in which the stored config differs (non-empty only when nothing finished is stored)."""
    fresh = "Run with --fresh (output.resume=false) to discard them and start over, or give this config another " \
            "output.run_name"
    if done and not rd.has_config():
        raise ConfigError(f"results without the config that made them: {rd.results} holds {len(done)} finished "
                          f"result(s) but {rd.uri}/{RunDir.CONFIG} is missing, so nothing says what produced them. "
                          + fresh)
    differ = resume_conflicts(cfg, rd.config_text()) if rd.has_config() else []
    if differ and done:
        raise ConfigError(
            f"{rd.uri}: its {len(done)} stored result(s) were produced under a different config, so they are not "
            "resumed:\n  " + "\n  ".join(differ) + "\n" + fresh)
    for shard, (stored, finished) in store.provenances().items():
        if not finished:
            continue  # failures only: every one of them is redone, nothing of it is resumed
        if stored is None:
            raise ConfigError(f"{store.root}/{shard}: a result shard without the fingerprint of the config and data "
                              "that produced it (copied in, or written by an older llmrec), so it is not resumed. "
                              + fresh)
        if stored == store.provenance:
            continue
        why = config_conflicts(cfg, stored.get("config") or {}) + data_conflicts(stored.get("data") or {},
                                                                                 store.provenance["data"])
        if why:
            raise ConfigError(f"{store.root}/{shard}: its {finished} result(s) were produced from another config "
                              "or other data (copied in from another run?), so they are not resumed:\n  "
                              + "\n  ".join(why) + "\n" + fresh)
    return differ


def merge_facts(into: dict[str, dict], batch: dict[str, dict]) -> list[str]:
    """Fold one batch's engine facts (role → facts) into the run's; a fact that took different values
    (e.g. in different actors) keeps every value seen. Returns ``role: key=value`` for each change."""
    changed = []
    for role, facts in batch.items():
        mine = into.setdefault(role, {})
        for key, value in facts.items():
            seen = mine.get(key)
            if seen == value or (isinstance(seen, list) and value in seen):
                continue
            mine[key] = value if seen is None else [*(seen if isinstance(seen, list) else [seen]), value]
            changed.append(f"{role}: {key}={value}")
    return changed


def cache_path_for(cfg: RunConfig) -> str | None:
    """The request cache file, on the driver's disk: ``output.cache_path``, else beside the run
    directories when those are local, else in the per-user cache (never on network storage)."""
    if not cfg.output.cache:
        return None
    if cfg.output.cache_path is not None:
        return storage.resolve(cfg.output.cache_path)
    if storage.is_uri(cfg.output.dir):
        return str(settings.cache_root() / REQUEST_CACHE_FILE)
    return str(Path(storage.resolve(cfg.output.dir)) / REQUEST_CACHE_FILE)


def run_key(p: RunPlan) -> str:
    """What names a run in the request cache's record of unsettled work: its directory, as the cache records the
    writer of an entry (``run_id``: a URI without credentials)."""
    return run_id(p.run_dir)


class WorkLedger:
    """The driver's side of a run's unsettled engine work (``serving.cache``): what the request cache holds as the
    run's (``run``) engine work that no stored record holds yet. The file is on the driver's disk
    (``cache_path_for``); the driver reads it and settles what it stored through its own connection (sqlite's
    locking covers the two writers on one local disk)."""

    def __init__(self, path: str, run: str):
        self.path, self.run = path, run

    @contextmanager
    def _cache(self, doing: str):
        from llmrec.serving.cache import RequestCache
        from llmrec.serving.cache_service import cache_errors

        with cache_errors(self.path, doing):
            cache = RequestCache(self.path)
            try:
                yield cache
            finally:
                cache.close()

    def settle(self, keys: list[str]) -> None:
        if keys:
            with self._cache("write") as cache:
                cache.settle(self.run, keys)

    def calls(self) -> list[tuple[str, "Result"]]:
        """(role, answer) of the run's unsettled engine calls; none without a cache file."""
        if not Path(self.path).exists():
            return []
        with self._cache("read") as cache:
            return cache.unsettled(self.run)

    def drop(self) -> None:
        if Path(self.path).exists():
            with self._cache("write") as cache:
                cache.drop_unsettled(self.run)


@dataclass
class _Setup:
    """What a run's map actors are given (``StageWorker``'s arguments) and how they are placed."""

    worker: dict
    resources: dict
    rows: list[dict]
    batch_size: int
    blocks: int  # Ray Data blocks the rows are read in
    ledger: "WorkLedger | None" = None  # the run's unsettled engine work in the request cache (None: no cache)


@contextmanager
def _provisioned(p: RunPlan, subject: "SharedSubject | None"):
    """Ray, the engines (``provision.RunEngines``: one strategy per role), the request cache service, the shared
    assets and the dataset's rows, made for the map actors; what was started is stopped on the way out (``time_*``
    phases in ``p.timings``)."""
    import ray

    from llmrec.pipelines.runner.judges import judging_spec
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.serving.cache_service import start_cache_service, stop_cache_service

    cfg, ex, t, t0 = p.config, p.config.execution, p.timings, time.perf_counter()
    ensure_ray(cfg.ray)
    t_ray = time.perf_counter()
    engines, cache = RunEngines(cfg, p.run_dir.name, subject), None
    try:
        engines.start()
        cache_path = cache_path_for(cfg)
        cache = start_cache_service(cache_path, f"llmrec-cache-{p.run_dir.name}") if cache_path else None
        # Ray Data's own progress output would interleave with the CLI's bar; its switch lives in
        # the process-global DataContext, so it is set here, once per run.
        ray.data.DataContext.get_current().enable_progress_bars = False
        ledger = WorkLedger(cache_path, run_key(p)) if cache_path else None
        worker = dict(bench_cfg=cfg.benchmark, engines=engines.clients(), cache=cache, retries=ex.retries,
                      backoff_s=ex.serve_backoff_s if ex.mode == "serve" else ex.backoff_s,
                      assets=(ray.put(p.assets),) if p.assets is not None else (),  # once, shared by every actor
                      transcripts=cfg.output.transcripts, judging=judging_spec(cfg, p.bench), run=run_id(p.run_dir),
                      work=(run_key(p), uuid.uuid4().hex) if ledger else None)
        setup = _Setup(worker, actor_resources(cfg.engine, ex, engines.thin), *_rows(p), ledger)
        t.update(time_ray_start_s=t_ray - t0, time_setup_s=time.perf_counter() - t_ray, time_engine_start_s=0.0,
                 time_worker_s=0.0, time_store_write_s=0.0)
        yield setup
    finally:
        t_stop = time.perf_counter()
        engines.stop()
        if cache is not None:
            stop_cache_service(cache)
        t["time_teardown_s"] = time.perf_counter() - t_stop


def _rows(p: RunPlan) -> tuple[list[dict], int, int]:
    """The dataset's rows, the map batch size and the number of blocks: one row per prefix group (samples sharing a
    prompt prefix run back to back on one replica), or, with a KV budget, one row per KV-sized slice of whole prefix
    groups, a block each: queued in order, pulled by whichever actor is free."""
    cfg, ex = p.config, p.config.execution
    groups = group_by_prefix(p.pending) if ex.order_by_prefix else [[s] for s in p.pending]
    batch_size, blocks = ex.batch_size, max(1, min(len(groups), 4 * ex.concurrency))
    if ex.kv_budget_tokens and ex.order_by_prefix:
        from llmrec.pipelines.runner.prompt_sizes import TokenCount, packed_rows, run_capacity
        from llmrec.serving.engine import build_engine

        sizer = build_engine(cfg.engine)  # not started: it states its block size, sequence limit, tokenizer
        groups = packed_rows(p.bench, cfg.benchmark, groups, run_capacity(sizer, ex), p.assets,
                             TokenCount(sizer.prompt_tokenizer()), replicas=ex.concurrency)
        batch_size, blocks = 1, max(1, len(groups))
    return [{"group": pack(g)} for g in groups], batch_size, blocks


def _absorb(p: RunPlan, batch: dict) -> list[Sample]:
    """A finished batch's samples; its timings, engine facts and transcript texts folded into the run's."""
    for k, v in batch_timings(batch).items():
        p.timings[f"time_{k}"] += v
    for facts in dict.fromkeys(batch["facts"]):
        for change in merge_facts(p.facts, json.loads(facts)):
            log.warning("engine %s (recorded in the run's %s and MLflow protocol tag)", change, RUN_FACTS_FILE)
    for prov in batch.get("provenance", ()):
        for role, value in json.loads(prov).items():  # the richest report of each role's engine wins
            if len(json.dumps(value)) >= len(json.dumps(p.engines_provenance.get(role, {}))):
                p.engines_provenance[role] = value
    texts = batch_texts(batch)
    if texts and p.texts is not None:  # before the records that refer to them
        p.texts.add(texts)
    return [s for g in decode(batch) for s in g]


def stream(p: RunPlan, progress: Progress | None = None, subject: "SharedSubject | None" = None) -> list[Sample]:
    """Send pending samples through Ray Data; write each finished batch; return them. ``subject``: a subject
    engine shared with other runs (a suite's), started here if it is not yet, never stopped here."""
    if not p.pending:
        return []
    import ray

    ex, t, written = p.config.execution, p.timings, []
    with _provisioned(p, subject) as setup:
        ds = ray.data.from_items(setup.rows, override_num_blocks=setup.blocks)
        # One operator (the actor pool) holds the run's resources, so Ray Data's reservation of resources between
        # operators has nothing to divide; recomputing it on every step of its scheduling loop was about a quarter of
        # that loop's CPU, on the engines' cores (docs/measurements.md). Set on this dataset's own context (a copy
        # made by from_items), not the process's.
        ds.context.op_resource_reservation_enabled = False
        with actor_options_accepted():  # Ray 2.60 has no named form of the restart / placement options yet
            ds = ds.map_batches(
                StageWorker, fn_constructor_kwargs=setup.worker, batch_size=setup.batch_size,
                udf_modifying_row_count=False,
                # one batch in flight per actor: a batch queued behind another on a busy replica would wait while an
                # idle replica has none (seen: both KV-packed batches of a 2-replica run on one replica)
                compute=ray.data.ActorPoolStrategy(size=ex.concurrency, max_tasks_in_flight_per_actor=1),
                batch_format="numpy", **setup.resources)
        # Fault tolerance: the actor pool restarts a dead actor (one on a lost node, or one that ended
        # itself because its engine died) up to execution.max_restarts times and runs its in-flight
        # batches again; lost blocks are rebuilt from lineage. A batch is written once it reaches this loop.
        t_start = time.perf_counter()
        # prefetch_batches=0: with Ray Data's default (1) a finished batch reaches this loop only once the next one
        # has finished too, so each would be written, charged to the budget and counted by the progress bar one
        # batch late, and a run's last two batches at its end
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0):
            t.setdefault("time_first_batch_s", time.perf_counter() - t_start)
            t_w = time.perf_counter()
            samples = _absorb(p, batch)
            p.store.write(samples)
            if setup.ledger is not None:  # the work these records hold is in the store now: counted from them
                setup.ledger.settle(batch_work(batch))
            written.extend(samples)
            t["time_store_write_s"] += time.perf_counter() - t_w
            if progress:
                progress(len(written), len(p.pending))
            if p.budget is not None and p.budget.charge(samples):
                break  # the budget is spent: leaving iter_batches shuts Ray Data's executor down, no batch starts
            if p.stop is not None and p.stop.update(samples):
                break  # decided: the same clean stop
        t["time_stream_s"] = time.perf_counter() - t_start
    return written


def collect(p: RunPlan) -> list[Sample]:
    """The newest record of each sample of this plan, in sample order."""
    records = p.store.load()
    return [records[str(s["sample_id"])] for s in p.samples if str(s["sample_id"]) in records]


def invocation_stats(rows: list[Sample]) -> dict[str, float]:
    """Engine calls, cache hits and prefill tokens of the given (freshly processed) rows."""
    hits = calls = prompt = cached = 0
    for r in rows:
        for out in (r.get("outputs") or {}).values():
            for o in out if isinstance(out, list) else [out]:
                prompt += o.get("prompt_tokens", 0)
                cached += o.get("cached_prompt_tokens", 0)
                if o.get("from_cache"):
                    hits += 1
                else:
                    calls += 1
    return {"cache_hits": hits, "engine_calls": calls, "prompt_tokens": prompt,
            "prefill_tokens": prompt - cached, "prefix_cache_hit_rate": (cached / prompt) if prompt else 0.0}
