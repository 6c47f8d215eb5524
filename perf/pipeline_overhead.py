"""Overhead of the llmrec pipeline over calling the engine directly.

The same prompts (a benchmark slice from a run config) go (a) through `llmrec run`'s code
path — Ray Data actor pool, result store, aggregation — and (b) through the same engine
called with no Ray running, in the same prefix-group order: in one process, or, where the
config runs several replicas (``execution.concurrency``), one engine per process, each
pulling the next prefix group when it is free. Request cache and
MLflow are off for both. The two alternate in rounds (direct, llmrec; every other round in
reverse: A B B A), so a machine whose speed drifts weighs on both alike; each round prints its
wall times with the 1-minute load average at each run's start and end (the model is loaded once, untimed,
before the first round, so neither side's first run reads it from a cold disk cache), and the summary the median
of the rounds' ratios (goal ≥ 0.95 with the CPU engine; where llama.cpp's threads fill every core, every
CPU-second Ray's own processes use beside them comes out of generation, which is why a local Ray runs without
metrics, task events and log monitor: ``ray.metrics``) and their spread. Each llmrec run starts
Ray and stops it after: ``ray.init`` (paid once per driver) and Ray Data's first execution, on a
one-row dataset (paid once per cluster: it starts Ray Data's detached stats, actor-location and
autoscaling-coordinator actors, which every later run on the cluster shares) are timed and
reported apart. ``--cold`` leaves that warm-up out, so the run pays for them. The report ends with the CPU that
Ray's processes used beside the engines and, from Linux's per-thread schedstat, how long the engines' threads
were ready to run but waited for a CPU on each side.

    python perf/pipeline_overhead.py                  # the PrefEval MCQ demo slice, 2 rounds: ~8 min on 2 cores
    python perf/pipeline_overhead.py configs/prefeval_mcq_demo.yaml --set benchmark.per_topic=1 --rounds 1
"""

from __future__ import annotations

import argparse
import atexit
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default="configs/prefeval_mcq_demo.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (direct, llmrec), every other one reversed")
    ap.add_argument("--cold", action="store_true",
                    help="no Ray Data warm-up: each run also starts Ray Data's once-per-cluster actors")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")

    from llmrec.pipelines.runner.run_config import load_run_config

    tmp = Path(tempfile.mkdtemp(prefix="llmrec-perf-"))
    cfg = load_run_config(args.config, args.overrides + [
        f"output.dir={tmp}", "output.cache=false", "output.resume=false", "tracking.enabled=false"])
    # untimed: the model file read from disk once, so the first timed run does not pay for a cold page cache
    print(f"engine warm-up (untimed): model loaded in {_engine_start(cfg):.1f} s", flush=True)
    _engine_close()
    ratios = []
    for r in range(1, args.rounds + 1):
        order = ("direct", "llmrec") if r % 2 else ("llmrec", "direct")
        got = {}
        for side in order:
            load0 = os.getloadavg()[0]
            got[side] = direct(cfg) if side == "direct" else through_llmrec(cfg, args.cold)
            got[side]["load"] = (load0, os.getloadavg()[0])
        d, p = got["direct"], got["llmrec"]
        ratios.append(d["wall_s"] / p["wall_s"])
        print(f"round {r}: " + " | ".join(
            f"{side} {got[side]['wall_s']:.1f} s (load {got[side]['load'][0]:.1f}-{got[side]['load'][1]:.1f})"
            for side in order) + f" -> ratio {ratios[-1]:.3f}", flush=True)
    report(cfg, d, p)
    print(f"\nratio llmrec/direct: median {statistics.median(ratios):.3f} spread {min(ratios):.3f}-"
          f"{max(ratios):.3f} over {len(ratios)} round(s) (samples/s through llmrec run ÷ calling the engine; "
          f"ray.init and the warm-up not counted)")


def direct(cfg) -> dict:
    """The slice through the engine itself, with no Ray, in prefix-group order (model load counted): one engine in this
    process, or, when the run config has ``execution.concurrency`` replicas, as many engines in as many processes, each
    pulling the next prefix group when it is free (what the run's actor pool does)."""
    from llmrec.pipelines import capabilities as caps
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.worker import group_by_prefix

    bench = get_benchmark(cfg.benchmark.name)
    root = resolve_data_dir(cfg.data.dir, caps.data(bench))
    samples = bench.build_samples(cfg.benchmark, root)
    assets = caps.assets(bench, cfg.benchmark, root)
    groups = group_by_prefix(samples)
    t0 = time.perf_counter()
    with EngineThreads(lambda proc: True) as threads:  # this process, and the pool's when there is one
        if cfg.execution.concurrency == 1:
            load_s = _engine_start(cfg)
            _run_group([s for g in groups for s in g], assets)
            _engine_close()
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(cfg.execution.concurrency, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=_engine_start, initargs=(cfg,)) as pool:
                load_s = max(pool.map(_run_group, groups, [assets] * len(groups)))
    return {"wall_s": time.perf_counter() - t0, "load_s": load_s, "n": len(samples), "threads": threads.result(),
            "sampler_s": threads.own_cpu_s}


_ENGINE: dict = {}  # the engine of this process (one per process of the direct side)


def _engine_start(cfg) -> float:
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.serving.engine import build_engine

    t0 = time.perf_counter()
    _ENGINE.update(engine=build_engine(cfg.engine), bench=get_benchmark(cfg.benchmark.name), cfg=cfg.benchmark)
    _ENGINE["engine"].start()
    _ENGINE["load_s"] = time.perf_counter() - t0
    atexit.register(_engine_close)  # a pool's worker: closed before the interpreter tears llama.cpp down
    return _ENGINE["load_s"]


def _engine_close() -> None:
    if "engine" in _ENGINE:
        _ENGINE.pop("engine").close()


def _run_group(samples: list, assets) -> float:
    """Samples through this process's engine; the engine's start-up time."""
    from llmrec.pipelines.runner.worker import process_samples

    engine = _ENGINE["engine"]
    process_samples(_ENGINE["bench"], _ENGINE["cfg"], samples, lambda role: engine, retries=0, assets=assets)
    return _ENGINE["load_s"]


def through_llmrec(cfg, cold: bool) -> dict:
    """The slice through ``run_evaluation``, Ray started before (timed apart) and stopped after."""
    import ray

    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.ray_env import ensure_ray

    t0 = time.perf_counter()
    ensure_ray(cfg.ray)
    ray_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if not cold:
        warm_ray_data()
    warm_s = time.perf_counter() - t0
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    with EngineThreads(lambda proc: "MapWorker" in proc.name()) as threads:  # Ray Data's map actors
        out = run_evaluation(cfg)
    wall = time.perf_counter() - t0
    cpu1 = cpu_seconds()
    ray.shutdown()
    return {"wall_s": wall, "ray_s": ray_s, "warm_s": warm_s, "stats": out.stats, "n": out.metrics["n_samples"],
            "cpu": (cpu0, cpu1), "threads": threads.result(), "sampler_s": threads.own_cpu_s}


def report(cfg, d: dict, p: dict) -> None:
    """The last round's two runs: rates, where llmrec's time went, the CPU beside its engine actor."""
    n, pipe_s, direct_s = d["n"], p["wall_s"], d["wall_s"]
    assert p["n"] == n, (p["n"], n)
    print(f"\nthe last round: samples {n}  engine: {cfg.engine.type}  mode: {cfg.execution.mode}")
    print(f"direct engine : {n / direct_s:8.3f} samples/s  ({direct_s:7.1f} s, incl. model load)")
    print(f"llmrec run    : {n / pipe_s:8.3f} samples/s  ({pipe_s:7.1f} s, incl. actor start + model load)")
    print(f"ray.init      : {p['ray_s']:7.1f} s (once per driver; excluded above)")
    print(f"Ray Data warm-up: {p['warm_s']:5.1f} s (once per cluster; excluded above)" if p["warm_s"] > 0.01
          else "Ray Data warm-up: none (--cold: the run started Ray Data's once-per-cluster actors)")
    print(f"ratio llmrec/direct: {direct_s / pipe_s:.3f}   (incl. ray.init and warm-up: "
          f"{direct_s / (pipe_s + p['ray_s'] + p['warm_s']):.3f})")
    t, reps = p["stats"], cfg.execution.concurrency
    each = ", mean per replica" if reps > 1 else ""
    print(f"\nwhere the llmrec run's time goes (s){'; the engines run side by side' if reps > 1 else ''}:")
    print(f"  direct: model load {d['load_s']:6.1f}   generate+score {direct_s - d['load_s']:6.1f}")
    rows = [("plan (samples, assets, store)", t.get("time_plan_s", 0)),
            ("setup (cache actor, datasets)", t.get("time_setup_s", 0)),
            (f"actor engine start (in worker{each})", t.get("time_engine_start_s", 0) / reps),
            (f"worker generate+score{f' ({each[2:]})' if each else ''}", t.get("time_worker_s", 0) / reps),
            ("store writes (driver)", t.get("time_store_write_s", 0)),
            ("stream rest: actor spawn, scheduling, transfer",
             t.get("time_stream_s", 0) - (t.get("time_engine_start_s", 0) + t.get("time_worker_s", 0)) / reps
             - t.get("time_store_write_s", 0)),
            ("teardown", t.get("time_teardown_s", 0)),
            ("aggregate", t.get("time_aggregate_s", 0)),
            ("outputs (parquet, json, publish)", t.get("time_outputs_s", 0)),
            ("plots", t.get("time_plots_s", 0))]
    for name, v in rows:
        print(f"  {name:48s} {v:6.1f}")
    print(f"  {'sum':48s} {sum(v for _, v in rows):6.1f}   (run_evaluation: {pipe_s:.1f})")
    cpu0, cpu1 = p["cpu"]
    used = sorted(((cpu1[k][1] - cpu0.get(k, (k, 0.0))[1], cpu1[k][0]) for k in cpu1
                   if "MapWorker" not in cpu1[k][0]), reverse=True)
    print(f"\nCPU seconds used during the run beside the engine actor{'s' if reps > 1 else ''} (processes alive at "
          f"its end; {pipe_s * len(os.sched_getaffinity(0)):.0f} CPU-s were there):")
    for sec, name in used:
        if sec >= 0.1:
            print(f"  {name:48s} {sec:6.1f}")
    print(f"  {'sum':48s} {sum(sec for sec, _ in used):6.1f}")
    waits = {side: got["threads"] for side, got in (("direct", d), ("llmrec", p)) if got["threads"]}
    if waits:
        print(f"\nthe engines' busy threads (ran >= {EngineThreads.BUSY_S:g} CPU-s; Linux schedstat, read every "
              f"{EngineThreads.EVERY_S:g} s): CPU-seconds run, and seconds spent ready to run but waiting for a CPU")
        for side, (n_threads, ran, waited) in waits.items():
            print(f"  {side:7s} {n_threads} thread(s): ran {ran:6.1f} CPU-s, waited {waited:5.1f} s "
                  f"({waited / n_threads:.1f} s per thread); the sampler itself used "
                  f"{(d if side == 'direct' else p)['sampler_s']:.2f} CPU-s")


def cpu_seconds() -> dict:
    """CPU seconds (user + system) so far of this process and the processes below it (Ray's, when it
    started the local instance), keyed by (pid, start time): {key: (name, seconds)}."""
    import psutil

    me = psutil.Process()
    out = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            with proc.oneshot():
                t = proc.cpu_times()
                cmd = proc.cmdline() or [proc.name()]
                name = "driver" if proc.pid == me.pid else cmd[0]
                if Path(name).name.startswith("python"):  # Ray's Python daemons: the script they run
                    name = " ".join(Path(a).name for a in cmd[1:3] if a != "-u")[-48:]
                out[(proc.pid, proc.create_time())] = (name, t.user + t.system)
        except psutil.Error:
            continue
    return out


class EngineThreads:
    """Run time and run-queue wait of the engines' threads, from Linux's per-thread schedstat (nanoseconds on a
    CPU, nanoseconds ready to run but waiting for one). ``engine(proc)`` picks, among this process and the
    processes below it, those that run an engine; in each, the threads that ran at least a quarter of its busiest
    thread's time (and ``BUSY_S``) count: the engine's compute threads, not an actor's start-up on its main
    thread. A background thread reads the counters every ``EVERY_S`` seconds (new processes are looked for
    every 2 s, then only their threads are read), so a thread's last fraction of a second before its process
    ends can be missed. ``result()``: (threads, CPU-s, wait s), or None where the kernel keeps no schedstat."""

    EVERY_S, BUSY_S = 0.5, 1.0

    def __init__(self, engine):
        import threading

        self._engine, self._pids, self._last_found = engine, set(), 0.0
        self._starting = True  # the first read: threads already there count from it, later ones from zero
        self._first: dict = {}  # (pid, tid) -> (run ns, wait ns) when first read
        self._last: dict = {}  # (pid, tid) -> (run ns, wait ns) when last read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.own_cpu_s = 0.0  # this sampler's own CPU time (its thread's)

    def __enter__(self) -> "EngineThreads":
        self._read(time.monotonic())
        self._starting = False
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._read(time.monotonic())

    def _loop(self) -> None:
        while not self._stop.wait(self.EVERY_S):
            self._read(time.monotonic())
        self.own_cpu_s = time.thread_time()

    def _read(self, now: float) -> None:
        import psutil

        if now - self._last_found >= 2.0:  # new processes (an engine's pool, Ray's actors) appear during the run
            self._last_found = now
            me = psutil.Process()
            for proc in [me, *me.children(recursive=True)]:
                try:
                    if proc.pid not in self._pids and self._engine(proc):
                        self._pids.add(proc.pid)
                except psutil.Error:
                    continue
        for pid in list(self._pids):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:  # ended
                self._pids.discard(pid)
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        ran, waited = (int(x) for x in f.read().split()[:2])
                except (OSError, ValueError):
                    continue
                self._first.setdefault((pid, tid), (ran, waited) if self._starting else (0, 0))
                self._last[(pid, tid)] = (ran, waited)

    def result(self) -> tuple[int, float, float] | None:
        per_pid: dict = {}
        for (pid, tid), (r, w) in self._last.items():
            per_pid.setdefault(pid, []).append((r - self._first[(pid, tid)][0], w - self._first[(pid, tid)][1]))
        busy = [(r, w) for threads in per_pid.values() for r, w in threads
                if r >= max(self.BUSY_S * 1e9, max(t[0] for t in threads) / 4)]
        if not busy:
            return None
        return len(busy), sum(r for r, _ in busy) / 1e9, sum(w for _, w in busy) / 1e9


def warm_ray_data() -> None:
    """One row through an actor pool: Ray Data's first execution on this cluster."""
    import ray.data

    class Noop:
        def __call__(self, batch):
            return batch

    ray.data.range(1).map_batches(Noop, concurrency=1, num_cpus=0).take_all()


if __name__ == "__main__":
    main()
