"""Where llama.cpp loses time inside Ray: the same work timed in this process, in a plain Ray actor, and in the
map actor of a Ray Data actor pool (what ``llmrec run`` uses in actors mode).

The work: the embedded model (Gemma 3 270M, llama.cpp, one thread per core by default) processes a prompt from an
empty cache and decodes a few tokens, ``--reps`` times; each place times it around the work only (model load and
actor start left out). The three alternate in rounds (direct, actor, Ray Data; every other round reversed), each
on a local Ray that the round starts and stops (direct runs before it starts, with no Ray at all). Every round
prints its times and how often the kernel preempted the engine's threads; the summary gives the median of each
place's time over direct, the median preemptions, and, for the last Ray Data pass, the CPU seconds that the
driver and Ray's other processes used beside the map actor.

``perf/pipeline_overhead.py`` times a whole run against the engine alone; this script tells which layer the
difference comes from. On a machine whose cores llama.cpp fills, any CPU taken beside it comes out of its
barriers (``perf/engine_interference.py``).

    python perf/actor_overhead.py                 # 2 rounds, about 3 minutes on 2 cores
    python perf/actor_overhead.py --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

PLACES = ("direct", "actor", "ray_data")


def work(threads: int, prompt_tokens: int, new_tokens: int, reps: int) -> dict:
    """Load the model, then time ``reps`` x (prompt from an empty cache + ``new_tokens`` decoded): seconds, this
    process's CPU seconds over the same span, and how often the kernel took a CPU from this process's threads
    while they could still run (involuntary context switches: nearly all of them llama.cpp's, the only threads
    busy here)."""
    from engine_interference import load

    llm, tokens = load(threads, prompt_tokens)
    llm.eval(tokens[:16])  # first call: buffers allocated (and llama.cpp's thread pool started)
    t0, c0, sw0 = time.perf_counter(), time.process_time(), preemptions()
    for _ in range(reps):
        llm.reset()
        llm.eval(tokens)
        for _ in range(new_tokens):
            llm.eval([tokens[-1]])
    out = {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
           "preempted": preemptions() - sw0}
    del llm
    return out


def preemptions() -> int:
    """Involuntary context switches of all this process's threads so far (Linux: ``/proc/self/task``; a process's
    own ``status`` file counts its main thread only, and the engine may run on another)."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("nonvoluntary_ctxt_switches"))
        except OSError:  # a thread that ended meanwhile
            continue
    return total


class _MapWork:
    """The Ray Data map actor's class: one row, one :func:`work`."""

    def __call__(self, batch: dict) -> dict:
        got = work(int(batch["threads"][0]), int(batch["prompt"][0]), int(batch["new"][0]), int(batch["reps"][0]))
        return {"s": [got["s"]], "cpu_s": [got["cpu_s"]], "preempted": [got["preempted"]]}


def in_ray(place: str, args) -> tuple[dict, dict]:
    """``work`` in a plain actor or a Ray Data map actor on a fresh local Ray; also the CPU seconds of the
    driver and Ray's processes (the map or plain actor left out) while it ran."""
    import ray

    from llmrec.ray_start import start_ray
    from pipeline_overhead import cpu_seconds, warm_ray_data

    start_ray(num_cpus=len(os.sched_getaffinity(0)), worker_niceness=0, worker_logs=False)
    try:
        spec = (args.threads, args.prompt_tokens, args.new_tokens, args.reps)
        if place == "actor":
            actor = ray.remote(num_cpus=1)(_Actor).remote()
            ray.get(actor.ready.remote())
            cpu0 = cpu_seconds()
            got = ray.get(actor.work.remote(*spec))
        else:
            ray.data.DataContext.get_current().enable_progress_bars = False
            warm_ray_data()  # Ray Data's detached actors start here, not during the timed pass
            row = dict(zip(("threads", "prompt", "new", "reps"), spec))
            ds = ray.data.from_items([row]).map_batches(
                _MapWork, batch_size=None, num_cpus=1,
                compute=ray.data.ActorPoolStrategy(size=1, max_tasks_in_flight_per_actor=1))
            cpu0 = cpu_seconds()
            batch = next(iter(ds.iter_batches(batch_size=None)))
            got = {"s": float(batch["s"][0]), "cpu_s": float(batch["cpu_s"][0]),
                   "preempted": int(batch["preempted"][0])}
        cpu1 = cpu_seconds()
    finally:
        ray.shutdown()
    beside = {}
    for key, (name, sec) in cpu1.items():
        if "MapWorker" not in name and "_Actor" not in name:
            beside[name] = beside.get(name, 0.0) + sec - cpu0.get(key, (name, 0.0))[1]
    return got, beside


class _Actor:
    def ready(self) -> bool:
        return True

    def work(self, *spec) -> dict:
        return work(*spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="llama.cpp threads")
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=6, help="prompts per timed pass")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the three places, every other one reversed")
    args = ap.parse_args()
    if min(args.threads, args.prompt_tokens, args.new_tokens, args.reps, args.rounds) < 1:
        ap.error("--threads, --prompt-tokens, --new-tokens, --reps and --rounds must be at least 1")
    if args.prompt_tokens > 4000:
        ap.error("--prompt-tokens: at most 4000 (the model is loaded with a 4,096-token context)")

    print(f"{len(os.sched_getaffinity(0))} cores; llama.cpp {args.threads} thread(s); {args.reps} x "
          f"({args.prompt_tokens}-token prompt + {args.new_tokens} decoded tokens) per pass", flush=True)
    times: dict[str, list[float]] = {p: [] for p in PLACES}
    preempted: dict[str, list[int]] = {p: [] for p in PLACES}
    beside: dict = {}
    for r in range(1, args.rounds + 1):
        cells = []
        for place in PLACES if r % 2 else PLACES[::-1]:
            load = os.getloadavg()[0]
            if place == "direct":
                got = work(args.threads, args.prompt_tokens, args.new_tokens, args.reps)
            else:
                got, used = in_ray(place, args)
                if place == "ray_data":
                    beside = used
            times[place].append(got["s"])
            preempted[place].append(got["preempted"])
            cells.append(f"{place} {got['s']:.2f} s (cpu {got['cpu_s']:.1f} s, preempted {got['preempted']}, "
                         f"load {load:.1f})")
        print(f"round {r}: " + " | ".join(cells), flush=True)
    print("\nCPU seconds beside the map actor during the last Ray Data pass:")
    for name, sec in sorted(beside.items(), key=lambda kv: -kv[1]):
        if sec >= 0.05:
            print(f"  {name:48s} {sec:6.2f}")
    print(f"  {'sum':48s} {sum(beside.values()):6.2f}")
    ratios = {p: [t / d for t, d in zip(times[p], times["direct"])] for p in PLACES[1:]}
    print("\ntime over direct: " + "  ".join(
        f"{p} median {statistics.median(v):.3f} spread {min(v):.3f}-{max(v):.3f}" for p, v in ratios.items()))
    print("times the engine's threads were preempted (median per pass): " + "  ".join(
        f"{p} {statistics.median(v):.0f}" for p, v in preempted.items()))


if __name__ == "__main__":
    main()
