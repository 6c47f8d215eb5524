"""Overhead of the llmrec pipeline over calling the engine directly.

The same prompts (a benchmark slice from a run config) go (a) through `llmrec run`'s code
path — Ray Data actor pool, result store, aggregation — and (b) through the same engine
called in one process, in the same prefix-group order. Prints samples/s for both and the
ratio (goal ≥ 0.95 with the CPU engine). Request cache and MLflow are off for both. The Ray
start-up is timed and reported separately: ``ray.init`` (paid once per driver) and Ray Data's first
execution, on a one-row dataset (paid once per cluster: it starts Ray Data's detached stats,
actor-location and autoscaling-coordinator actors, which every later run on the cluster shares).
``--cold`` leaves that warm-up out, so the run pays for them.

    python perf/pipeline_overhead.py configs/prefeval_mcq_demo.yaml --set benchmark.per_topic=3
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default="configs/prefeval_mcq_demo.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    ap.add_argument("--cold", action="store_true",
                    help="no Ray Data warm-up: the run also starts Ray Data's once-per-cluster actors")
    args = ap.parse_args()

    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.common.datasets import resolve_data_dir
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.pipelines.runner.run_config import load_run_config
    from llmrec.pipelines.runner.worker import group_by_prefix, process_samples
    from llmrec.serving.engine import build_engine

    tmp = Path(tempfile.mkdtemp(prefix="llmrec-perf-"))
    cfg = load_run_config(args.config, args.overrides + [
        f"output.dir={tmp}", "output.cache=false", "output.resume=false", "tracking.enabled=false"])
    bench = get_benchmark(cfg.benchmark.name)
    root = resolve_data_dir(cfg.data.dir, bench.data)
    samples = bench.build_samples(cfg.benchmark, root)
    assets = bench.assets(cfg.benchmark, root)
    n = len(samples)

    # (b) direct: one process, the engine itself, same order
    t0 = time.perf_counter()
    engine = build_engine(cfg.engine)
    engine.start()
    load_s = time.perf_counter() - t0
    ordered = [s for g in group_by_prefix(samples) for s in g]
    process_samples(bench, cfg.benchmark, ordered, lambda role: engine, retries=0, assets=assets)
    direct_s = time.perf_counter() - t0
    engine.close()

    # (a) llmrec: Ray started first (timed apart), then the whole run
    t1 = time.perf_counter()
    ensure_ray(cfg.ray)
    ray_s = time.perf_counter() - t1
    t1 = time.perf_counter()
    if not args.cold:
        warm_ray_data()
    warm_s = time.perf_counter() - t1
    cpu0 = cpu_seconds()
    t2 = time.perf_counter()
    out = run_evaluation(cfg)
    pipe_s = time.perf_counter() - t2
    cpu1 = cpu_seconds()
    assert out.metrics["n_samples"] == n

    print(f"samples: {n}  engine: {cfg.engine.type}  mode: {cfg.execution.mode}")
    print(f"direct engine : {n / direct_s:8.3f} samples/s  ({direct_s:7.1f} s, incl. model load)")
    print(f"llmrec run    : {n / pipe_s:8.3f} samples/s  ({pipe_s:7.1f} s, incl. actor start + model load)")
    print(f"ray.init      : {ray_s:7.1f} s (once per driver; excluded above)")
    print(f"Ray Data warm-up: {warm_s:5.1f} s (once per cluster; excluded above)" if not args.cold
          else "Ray Data warm-up: none (--cold: the run started Ray Data's once-per-cluster actors)")
    print(f"ratio llmrec/direct: {direct_s / pipe_s:.3f}   (incl. ray.init and warm-up: "
          f"{direct_s / (pipe_s + ray_s + warm_s):.3f})")
    t = out.stats
    print("\nwhere the llmrec run's time goes (s):")
    print(f"  direct: model load {load_s:6.1f}   generate+score {direct_s - load_s:6.1f}")
    rows = [("plan (samples, assets, store)", t.get("time_plan_s", 0)),
            ("setup (cache actor, datasets)", t.get("time_setup_s", 0)),
            ("actor engine start (in worker)", t.get("time_engine_start_s", 0)),
            ("worker generate+score", t.get("time_worker_s", 0)),
            ("store writes (driver)", t.get("time_store_write_s", 0)),
            ("stream rest: actor spawn, scheduling, transfer",
             t.get("time_stream_s", 0) - t.get("time_engine_start_s", 0) - t.get("time_worker_s", 0)
             - t.get("time_store_write_s", 0)),
            ("teardown", t.get("time_teardown_s", 0)),
            ("aggregate", t.get("time_aggregate_s", 0)),
            ("outputs (parquet, json, publish)", t.get("time_outputs_s", 0)),
            ("plots", t.get("time_plots_s", 0))]
    for name, v in rows:
        print(f"  {name:48s} {v:6.1f}")
    print(f"  {'sum':48s} {sum(v for _, v in rows):6.1f}   (run_evaluation: {pipe_s:.1f})")
    used = sorted(((cpu1[k][1] - cpu0.get(k, (k, 0.0))[1], cpu1[k][0]) for k in cpu1
                   if "MapWorker" not in cpu1[k][0]), reverse=True)
    print(f"\nCPU seconds used during the run beside the engine actor (processes alive at its end; "
          f"{pipe_s * len(os.sched_getaffinity(0)):.0f} CPU-s were there):")
    for sec, name in used:
        if sec >= 0.1:
            print(f"  {name:48s} {sec:6.1f}")
    print(f"  {'sum':48s} {sum(sec for sec, _ in used):6.1f}")


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


def warm_ray_data() -> None:
    """One row through an actor pool: Ray Data's first execution on this cluster."""
    import ray.data

    class Noop:
        def __call__(self, batch):
            return batch

    ray.data.range(1).map_batches(Noop, concurrency=1, num_cpus=0).take_all()


if __name__ == "__main__":
    main()
