"""Prefix-cache hits across ray.serve.llm replicas: 1 vs 2 replicas, prefix affinity on vs off.

``llmrec run`` in ``execution.mode: serve`` on the scale model (``model: scale-llama``: random
weights, it measures scheduling and memory, not quality): PrefEval generation, 4 pairs x 3 turn
settings (prompts of ~6k-14k tokens; the turn settings of a pair share its opening, so each pair is
a prefix group of a leader and two followers), rows packed to the KV budget and spread over the
replicas. Variants:

- ``1-replica``: one replica (and one client actor);
- ``2-default``: two replicas behind Serve's default power-of-two router (``prefix_affinity: false``);
- ``2-affinity``: two replicas behind llmrec's ``PrefixAffinityRouter`` (serving/engines/vllm/routing.py).

Per variant: wall time, prompt and cached prompt tokens (vLLM's per-request ``num_cached_tokens``,
reported in each answer's ``usage.prompt_tokens_details.cached_tokens``), the hit rate, computed
prefill ÷ the prefix-tree minimum, and how many followers read their group's prefix from the cache.

    .venv-vllm/bin/python perf/serve_affinity.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from long_context import BLOCK, Scale, load, load1, prefix_tree_tokens, prompt_ids, run_config

SCALE = Scale(turns=[8, 16, 28], topics=["travel_restaurant"], per_topic=4, max_model_len=20_480)
VARIANTS = {"1-replica": (1, True), "2-default": (2, False), "2-affinity": (2, True)}


def serve_config(name: str, out: Path) -> dict:
    replicas, affinity = VARIANTS[name]
    cfg = run_config(SCALE, "packed", out)
    cfg["engine"] = {**cfg["engine"], "counters_dir": None, "prefix_affinity": affinity}
    cfg["execution"] = {**cfg["execution"], "mode": "serve", "concurrency": replicas}
    cfg["ray"] = {"num_cpus": 8}  # logical: a ray.serve.llm replica takes two, its ingress one, each client 0.1
    cfg["output"] = {**cfg["output"], "run_name": f"serve-{replicas}-{'affinity' if affinity else 'default'}"}
    return cfg


def followers_hit(records: list[dict]) -> tuple[int, int]:
    """(followers that read cached tokens, followers): per prefix group the longest prompt leads."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["prefix_key"], []).append(r["outputs"]["answer"])
    hit = total = 0
    for answers in groups.values():
        for a in sorted(answers, key=lambda a: -a["prompt_tokens"])[1:]:
            total += 1
            hit += a["cached_prompt_tokens"] > 0
    return hit, total


def run_variant(name: str, out: Path, minimum: int) -> dict:
    from llmrec.config import validate
    from llmrec.pipelines.common.store import ResultStore
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.run_config import RunConfig

    cfg = validate(RunConfig, serve_config(name, out))
    t0 = time.perf_counter()
    outcome = run_evaluation(cfg)
    wall = time.perf_counter() - t0
    records = list(ResultStore(outcome.run_dir / "results").load().values())
    answers = [r["outputs"]["answer"] for r in records]
    prompt = sum(a["prompt_tokens"] for a in answers)
    cached = sum(a["cached_prompt_tokens"] for a in answers)
    hit, followers = followers_hit(records)
    return {"variant": name, "wall_s": wall, "samples": len(records), "prompt_tokens": prompt,
            "cached_tokens": cached, "hit_rate": cached / prompt, "prefill_ratio": (prompt - cached) / minimum,
            "followers_hit": f"{hit}/{followers}", "load": load1()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {list(VARIANTS)}")
    ap.add_argument("--out", type=Path, default=Path("runs/serve_affinity"), help="run directories")
    args = ap.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    if set(names) - set(VARIANTS):
        ap.error(f"--variants: a subset of {list(VARIANTS)}")
    import ray

    from llmrec.config import validate
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.pipelines.runner.run_config import RunConfig

    out = args.out.resolve()
    t_start = time.perf_counter()
    print(f"load before: {load()}", flush=True)
    cfg = validate(RunConfig, serve_config(names[0], out))
    ids, max_tokens = prompt_ids(cfg)
    minimum = prefix_tree_tokens(ids)
    print(f"scale model through ray.serve.llm, KV {SCALE.budget_tokens:,} tokens per replica (block {BLOCK}); "
          f"{len(ids)} prompts of {min(map(len, ids)):,}-{max(map(len, ids)):,} tokens, {sum(map(len, ids)):,} in "
          f"all, prefix-tree minimum {minimum:,}; answers up to {max_tokens} tokens", flush=True)
    ensure_ray(cfg.ray)
    rows = []
    for name in names:
        rows.append(run_variant(name, out, minimum))
        print(rows[-1], flush=True)
    ray.shutdown()
    print(f"load after: {load()}; {time.perf_counter() - t_start:.0f} s in all")
    print(f"{'replicas':12} {'wall s':>7} {'load':>5} {'prompt tok':>11} {'cached tok':>11} {'hit rate':>8} "
          f"{'ratio':>6}  followers with cached tokens")
    for r in rows:
        print(f"{r['variant']:12} {r['wall_s']:7.1f} {r['load']:5.1f} {r['prompt_tokens']:11,} "
              f"{r['cached_tokens']:11,} {r['hit_rate']:8.2f} {r['prefill_ratio']:6.2f}  {r['followers_hit']}")
    return 0


if __name__ == "__main__":  # vLLM spawns its EngineCore: the guard keeps the child from re-running main
    sys.exit(main())
