"""How much a little background CPU slows llama.cpp, by thread count.

The embedded model (Gemma 3 270M, llama.cpp) processes one prompt and generates tokens with 1 and with all
threads, first on a quiet machine, then beside a background process that wakes every ``--period-ms`` and
busy-waits ``--busy-ms`` (by default 1.5 ms every 9.5 ms: 16 % of one core, about what Ray's driver, daemons
and idle actors take beside a run, see ``perf/pipeline_overhead.py``). llama.cpp's threads meet at a barrier
after every operation, so on a machine with no free core one preempted thread stalls the others: the slowdown
is a multiple of the CPU the background takes. With a core left free, it is none.

    python perf/engine_interference.py            # about 2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

BUSY = ("import sys, time\nbusy, pause = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3\nwhile True:\n"
        "    t = time.perf_counter()\n    while time.perf_counter() - t < busy:\n        pass\n    time.sleep(pause)\n")


def timed(llm, tokens: list[int], new: int, reps: int) -> tuple[float, float]:
    """Best of ``reps``: seconds to process ``tokens`` from an empty cache, and to decode ``new`` more tokens."""
    best = (float("inf"), float("inf"))
    for _ in range(reps):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        t1 = time.perf_counter()
        for _ in range(new):
            llm.eval([tokens[-1]])
        best = min(best[0], t1 - t0), min(best[1], time.perf_counter() - t1)
    return best


def load(threads: int, prompt_tokens: int):
    """The embedded model under llama.cpp with ``threads`` threads for prompts and decoding, and a prompt of
    ``prompt_tokens`` tokens (at most about 4,000)."""
    import llama_cpp

    from llmrec.serving.engines.llamacpp import llama_class
    from llmrec.serving.local import embedded_model

    path, _ = embedded_model()
    # as the engine loads it (engine.use_extra_bufts false): llama.cpp's CPU-specific weight repacking (AMX) faults
    # in VMs that advertise AMX without enabling it
    llm = llama_class(llama_cpp, use_extra_bufts=False)(str(path), n_ctx=4096, n_threads=threads, n_threads_batch=threads, n_batch=512,
                          n_ubatch=512, swa_full=True, verbose=False)
    text = " ".join(f"The user said item {i} was lovely and asked for more like it." for i in range(400))
    return llm, llm.tokenize(text.encode())[:prompt_tokens]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--new-tokens", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3, help="runs per case; the best is printed")
    ap.add_argument("--busy-ms", type=float, default=1.5)
    ap.add_argument("--period-ms", type=float, default=9.5, help="busy plus pause")
    args = ap.parse_args()

    cores = len(os.sched_getaffinity(0))
    share = args.busy_ms / args.period_ms
    print(f"{cores} cores; background: {args.busy_ms} ms busy every {args.period_ms} ms = {share:.0%} of one core "
          f"({share / cores:.0%} of the machine)")
    for threads in sorted({1, cores}):
        llm, tokens = load(threads, args.prompt_tokens)
        timed(llm, tokens[:64], 1, 1)  # warm
        quiet = timed(llm, tokens, args.new_tokens, args.reps)
        bg = subprocess.Popen([sys.executable, "-c", BUSY, str(args.busy_ms), str(args.period_ms - args.busy_ms)])
        try:
            time.sleep(0.5)
            loaded = timed(llm, tokens, args.new_tokens, args.reps)
        finally:
            bg.kill()
            bg.wait()
        del llm
        print(f"threads={threads}: prefill {len(tokens)} tokens {quiet[0]:6.2f} s quiet, {loaded[0]:6.2f} s beside "
              f"the background (x{loaded[0] / quiet[0]:.2f}); decode {args.new_tokens} tokens {quiet[1]:5.2f} s, "
              f"{loaded[1]:5.2f} s (x{loaded[1] / quiet[1]:.2f})")


if __name__ == "__main__":
    main()
