"""What storing the transcript of every sample costs: bytes on disk and run time.

A PrefEval MCQ slice with long conversations (turns 10, 100 and 298: samples of one pair, and every pair, share
almost every message) runs through `llmrec run`'s code path on the fake engine, which sleeps ``--delay`` seconds per
request to look like a real one. Prints

(a) storage: the run's text store (``transcripts/``) ÷ the bytes of the distinct texts it holds (target ≤ 1.5),
    and the same with the request references the records carry (the growth of ``results/`` and
    ``samples.parquet`` over the run without capture) counted too;
(b) run-time overhead: the same run with capture on (A) and off (B, ``output.transcripts=false``), interleaved
    A/B/B/A (``--rounds`` times, after ``--warmup`` discarded runs), each run fresh (``output.resume=false``),
    request cache and MLflow off, Ray started once before; median wall time of A ÷ median of B - 1 (target ≤ 3 %).
    On a loaded machine the runs' own spread (actor start-up) can exceed that, so it also prints the time of the
    only code capture changes (the engine workers, where references are built, and the driver's writes), A - B.

    nice -n 10 python perf/transcripts.py --topics travel_restaurant shop_fashion --per-topic 2
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", nargs="+", default=["travel_restaurant", "travel_hotel", "shop_fashion"])
    ap.add_argument("--per-topic", type=int, default=3, help="preference/question pairs per topic")
    ap.add_argument("--turns", type=int, nargs="+", default=[10, 100, 298])
    ap.add_argument("--delay", type=float, default=0.2, help="fake engine: seconds per request")
    ap.add_argument("--rounds", type=int, default=2, help="A/B/B/A repetitions")
    ap.add_argument("--warmup", type=int, default=1, help="runs before the measured ones (discarded: the first run "
                                                         "after Ray's start pays imports and worker start-up)")
    ap.add_argument("--batch-size", type=int, default=4)
    args = ap.parse_args()

    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.pipelines.runner.run_config import RunConfig
    from llmrec.rundir import RunDir
    from llmrec.transcripts import TextStore

    tmp = Path(tempfile.mkdtemp(prefix="llmrec-perf-transcripts-"))

    def cfg(capture: bool) -> RunConfig:
        return RunConfig.model_validate({
            "benchmark": {"name": "prefeval", "task": "mcq", "topics": args.topics, "forms": ["explicit"],
                          "turns": args.turns, "methods": ["zero-shot"], "per_topic": args.per_topic},
            "engine": {"type": "fake", "delay_s": args.delay, "default": "<choice>A</choice>"},
            "execution": {"concurrency": 1, "batch_size": args.batch_size},
            "ray": {"num_cpus": 2},
            "output": {"dir": str(tmp), "run_name": "on" if capture else "off", "resume": False, "cache": False,
                       "transcripts": capture},
            "tracking": {"enabled": False},
        })

    for attempt in range(3):  # Ray gives its raylet 30 s to register: on a loaded machine that can run out
        try:
            ensure_ray(cfg(True).ray)
            break
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for it
            if attempt == 2 or "timed out during startup" not in str(e):
                raise
            print(f"Ray did not start ({e}); trying again", flush=True)
            import ray

            ray.shutdown()
    times: dict[bool, list[float]] = {True: [], False: []}
    stream: dict[bool, list[float]] = {True: [], False: []}
    work: dict[bool, list[float]] = {True: [], False: []}  # the only code capture changes: workers + driver writes
    n = 0
    for _ in range(args.warmup):
        run_evaluation(cfg(True))
    for _ in range(args.rounds):
        for capture in (True, False, False, True):
            t0 = time.perf_counter()
            out = run_evaluation(cfg(capture))
            times[capture].append(time.perf_counter() - t0)
            stream[capture].append(out.stats["time_stream_s"])
            work[capture].append(out.stats["time_worker_s"] + out.stats["time_store_write_s"])
            n = int(out.metrics.get("n_samples", out.stats["samples_new"]))
            print(f"  {'A on ' if capture else 'B off'}  {times[capture][-1]:7.2f} s  "
                  f"(stream {out.stats['time_stream_s']:.2f} s, workers {out.stats['time_worker_s']:.2f} s, "
                  f"driver writes {out.stats['time_store_write_s']:.3f} s)",
                  flush=True)

    on, off = RunDir(tmp / "on"), RunDir(tmp / "off")
    store = TextStore(on.transcripts)
    texts = store.get(store.known())
    distinct = sum(len(t.encode()) for t in texts.values())
    text_bytes = _size(on.path / RunDir.TRANSCRIPTS)
    refs = (_size(on.path / RunDir.RESULTS) - _size(off.path / RunDir.RESULTS)
            + on.file(RunDir.SAMPLES).stat().st_size - off.file(RunDir.SAMPLES).stat().st_size)
    a, b = statistics.median(times[True]), statistics.median(times[False])
    sa, sb = statistics.median(stream[True]), statistics.median(stream[False])
    wa, wb = statistics.median(work[True]), statistics.median(work[False])
    print(f"slice: {n} samples (topics {args.topics}, {args.per_topic} pairs each, turns {args.turns}), fake engine "
          f"{args.delay} s/request, {args.rounds}x A/B/B/A")
    print(f"(a) distinct texts: {len(texts)} ({distinct / 1e6:.3f} MB); text store {text_bytes / 1e6:.3f} MB "
          f"-> ratio {text_bytes / distinct:.3f}; with the records' request references (+{refs / 1e6:.3f} MB) "
          f"{(text_bytes + refs) / distinct:.3f}")
    print(f"(b) run time, median: capture on {a:.2f} s, off {b:.2f} s -> overhead {100 * (a / b - 1):+.2f} % "
          f"(streaming phase: {sa:.2f} s vs {sb:.2f} s, {100 * (sa / sb - 1):+.2f} %; runs of one variant spread "
          f"{min(times[True] + times[False]):.1f}-{max(times[True] + times[False]):.1f} s)")
    print(f"    the work capture adds (engine workers + driver writes, median {wa:.3f} s vs {wb:.3f} s): "
          f"{wa - wb:+.3f} s = {100 * (wa - wb) / b:+.2f} % of the run without capture")


if __name__ == "__main__":
    main()
