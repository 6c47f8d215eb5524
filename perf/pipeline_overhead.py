"""Overhead of the llmrec pipeline over calling the engine directly.

The same prompts (a benchmark slice from a run config) go (a) through `llmrec run`'s code
path — Ray Data actor pool, result store, aggregation — and (b) through the same engine
called in one process, in the same prefix-group order. Prints samples/s for both and the
ratio (goal ≥ 0.95 with the CPU engine). Request cache and MLflow are off for both; the
Ray start-up is timed and reported separately (it is paid once per driver, not per run).

    python perf/pipeline_overhead.py configs/prefeval_mcq_demo.yaml --set benchmark.per_topic=3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default="configs/prefeval_mcq_demo.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
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
    t2 = time.perf_counter()
    out = run_evaluation(cfg)
    pipe_s = time.perf_counter() - t2
    assert out.metrics["n_samples"] == n

    print(f"samples: {n}  engine: {cfg.engine.type}  mode: {cfg.execution.mode}")
    print(f"direct engine : {n / direct_s:8.3f} samples/s  ({direct_s:7.1f} s, incl. model load)")
    print(f"llmrec run    : {n / pipe_s:8.3f} samples/s  ({pipe_s:7.1f} s, incl. actor start + model load)")
    print(f"ray.init      : {ray_s:7.1f} s (once per driver; excluded above)")
    print(f"ratio llmrec/direct: {direct_s / pipe_s:.3f}   (incl. ray.init: {direct_s / (pipe_s + ray_s):.3f})")
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


if __name__ == "__main__":
    main()
