"""`llmrec view` page times on a generated run of 10,000 samples (PrefEval MCQ records with transcripts); with
--pairs, `llmrec view A B --compare` on two such runs that differ on a tenth of their samples.

Loads the run once (as `llmrec view` does), serves it as `llmrec view` does (uvicorn on a free port of 127.0.0.1,
in a thread), then times HTTP requests end to end (httpx: request sent → whole page read): unfiltered pages across
the run, each verdict filter, a setting filter, text searches, and sample pages; prints the load time and
p50 / p95 / max per kind and overall.
Target: p95 ≤ 300 ms. E.g. `python perf/viewer.py --samples 10000 --turns 10` (`--pairs`: the pair pages).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmrec.pipelines.results.viewer import PAGE_SIZE, Viewer, samples_path, serve  # noqa: E402
from tests.pipelines.runner.viewer_fixtures import prefeval_run  # noqa: E402


def _client(viewer, pairs=None):
    import threading

    import httpx

    got: list[str] = []
    threading.Thread(target=serve, args=(viewer, "127.0.0.1", 0, got.append, pairs), daemon=True).start()
    while not got:
        time.sleep(0.05)
    client = httpx.Client(base_url=got[0], timeout=60)
    for _ in range(100):  # the thread has the address before uvicorn accepts: wait until it answers
        try:
            client.get("/samples")
            break
        except httpx.TransportError:
            time.sleep(0.1)
    return client


def _time(client, kinds: dict, requests: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(requests):
        for k, url in kinds.items():
            u = url()
            t = time.perf_counter()
            res = client.get(u)
            times[k].append(time.perf_counter() - t)
            assert res.status_code == 200, (u, res.status_code)
    return times


def measure(run: Path, requests: int = 40, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    viewer = Viewer.open([str(run)])
    load_s = time.perf_counter() - t0
    client = _client(viewer)
    n = len(viewer.index)
    rng = random.Random(seed)
    pages = max(1, n // PAGE_SIZE)
    setting = viewer.options["setting"][0]
    ids = list(viewer.index["sample_id"])
    kinds = {
        "list": lambda: f"/samples?page={rng.randint(1, pages)}",
        "verdict": lambda: samples_path(verdict=rng.choice(["right", "wrong", "missed", "failed"]),
                                        page=str(rng.randint(1, 3))),
        "setting": lambda: samples_path(benchmark="prefeval", setting=setting, verdict="wrong"),
        "search": lambda: samples_path(q=f"preference {rng.randint(0, n - 1)}:"),
        "sample": lambda: "/sample?run=0&id=" + rng.choice(ids),
    }
    client.get("/samples")  # warm-up: template compilation
    return {"samples": n, "load_s": load_s, "times": _time(client, kinds, requests)}


def two_runs(root: Path, n: int, turns: int) -> tuple[Path, Path]:
    """Two runs of ``n`` samples: B flips every tenth sample's verdict and edits every 25th question; each run
    holds one sample the other lacks."""
    a = prefeval_run(root / "a", n=n, turns=turns, skip=(n - 1,))
    flip = {i: "right" if i % 2 else "wrong" for i in range(4, n, 10)}
    b = prefeval_run(root / "b", n=n, turns=turns, skip=(n - 2,), kinds=flip,
                     edits={i: "Answer in one word." for i in range(7, n, 25)})
    return a, b


def measure_pairs(a: Path, b: Path, requests: int = 40, seed: int = 0) -> dict:
    from llmrec.pipelines.results.viewer_pairs import PairIndex, pair_path, pairs_path

    t0 = time.perf_counter()
    pairs = PairIndex.open(a, b)
    load_s = time.perf_counter() - t0
    client = _client(pairs.viewer, pairs)
    n = len(pairs.index)
    rng = random.Random(seed)
    pages = max(1, n // PAGE_SIZE)
    ids = list(pairs.index["sample_id"])
    changed = list(pairs.query({"change": "changed"})["sample_id"])
    kinds = {
        "list": lambda: f"/pairs?page={rng.randint(1, pages)}",
        "change": lambda: pairs_path(change=rng.choice(["changed", "right→wrong", "unchanged", "only in B"]),
                                     page=str(rng.randint(1, 3))),
        "search": lambda: pairs_path(q=f"preference {rng.randint(0, n - 1)}:"),
        "pair": lambda: pair_path("0", rng.choice(ids)),
        "changed": lambda: pair_path("0", rng.choice(changed)),
    }
    client.get("/pairs")
    return {"samples": n, "load_s": load_s, "times": _time(client, kinds, requests)}


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[-1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10, help="inter-turn exchanges per conversation")
    ap.add_argument("--requests", type=int, default=40, help="requests per kind of page")
    ap.add_argument("--pairs", action="store_true", help="time `llmrec view A B --compare` on two runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        if args.pairs:
            a, b = two_runs(Path(tmp), args.samples, args.turns)
            print(f"generated two {args.samples}-sample runs in {time.perf_counter() - t:.1f}s")
            got = measure_pairs(a, b, args.requests)
        else:
            run = prefeval_run(Path(tmp) / "run", n=args.samples, turns=args.turns)
            print(f"generated a {args.samples}-sample run in {time.perf_counter() - t:.1f}s")
            got = measure(run, args.requests)
    print(f"loaded {got['samples']} samples in {got['load_s']:.2f}s")
    every = []
    for k, xs in got["times"].items():
        every += xs
        print(f"{k:8s} n={len(xs):3d}  p50 {statistics.median(xs) * 1e3:6.1f} ms  p95 {p95(xs) * 1e3:6.1f} ms  "
              f"max {max(xs) * 1e3:6.1f} ms")
    print(f"all      n={len(every):3d}  p95 {p95(every) * 1e3:.1f} ms (target ≤ 300 ms)")


if __name__ == "__main__":
    main()
