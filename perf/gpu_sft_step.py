"""Memory and speed of one `llmrec sft` training step on one CUDA GPU, at the GPU recipe's settings.

docs/sft.md's GPU recipe (Llama-3.1-8B, LoRA r 16 on q_proj and v_proj, bfloat16, micro-batches of
2 × up to 4k tokens, no gradient checkpointing) sized its GPUs from model size and FLOPs. This
script measures them: it builds the architecture of ``configs/models/llama-3.1-8b-instruct.json``
with **random weights** (no download: a step's time and memory do not depend on the values),
wraps it with the SFT code's own LoRA (``with_lora``) and runs the SFT code's own optimizer step
(``train_step``: the left-padded collate, the loss on the target tokens only, gradient clipping,
AdamW) on random token ids, per micro-batch shape. Reported per shape (micro-batch × tokens):
the median step time, tokens/s, the achieved TFLOP/s and the peak GPU memory PyTorch allocated.

FLOP count per step: 4 × non-embedding parameters per token (forward 2, backward 2: the frozen
weights need the gradient of their inputs only, not their own) plus causal attention, forward
2 × layers × hidden × L² per sequence and backward twice that.

Usage (on a machine with a CUDA GPU, torch, transformers and peft)::

    python perf/gpu_sft_step.py                                   # JSON lines, then the summary
    python perf/gpu_sft_step.py --shapes 2x4096 1x8192 --out sft_step.json
    python perf/gpu_sft_step.py --tiny --device cpu               # the same code on a 2-layer model (a check)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

from gpu_prefill import build, emit, non_embedding  # the prefill script's model, count and output

ROOT = Path(__file__).resolve().parents[1]
RECIPE_LORA = SimpleNamespace(r=16, alpha=32, dropout=0.05, target_modules=["q_proj", "v_proj"])
TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=512)  # --tiny: the code runs, nothing is measured


def sft_loop():
    """The SFT worker module (``llmrec.tuning.sft.loop``), loaded from its file: that module imports only the
    standard library at the top, so a GPU machine needs torch, transformers and peft, not llmrec installed."""
    spec = importlib.util.spec_from_file_location("sft_loop", ROOT / "tuning" / "sft" / "loop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_flops(cfg, non_embedding: int, batch: int, length: int) -> float:
    dense = 4.0 * non_embedding * batch * length
    attention = 3 * 2.0 * cfg.num_hidden_layers * cfg.hidden_size * length * length * batch
    return dense + attention


def measure(shapes: list[tuple[int, int]], *, device: str = "cuda", tiny: bool = False, target: int = 64,
            steps: int = 3) -> dict:
    """Time ``steps`` SFT steps (after one warm-up step) per (micro-batch, tokens) shape; one micro-batch a step,
    the last ``target`` tokens of each sequence its loss tokens."""
    import torch

    if any(length <= target for _, length in shapes):
        raise ValueError(f"every shape needs more tokens than the {target} target tokens: {shapes}")

    loop = sft_loop()
    cuda = device == "cuda"
    t0 = time.perf_counter()
    cfg, base = build(device, **(TINY if tiny else {}))
    non_embed = non_embedding(base)
    model = loop.with_lora(base, RECIPE_LORA, seed=0)
    model.train()
    build_s = time.perf_counter() - t0
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for batch, length in shapes:
        examples = []
        for _ in range(batch):
            ids = torch.randint(1, cfg.vocab_size, (length,), generator=gen).tolist()
            examples.append(SimpleNamespace(input_ids=ids, labels=[-100] * (length - target) + ids[-target:]))
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            times = []
            for i in range(steps + 1):
                if cuda:
                    torch.cuda.synchronize()
                t = time.perf_counter()
                loop.train_step(model, opt, sched, [examples], 0, torch.device(device), 1.0)
                if cuda:
                    torch.cuda.synchronize()
                if i:  # the first step warms kernels and allocator up
                    times.append(time.perf_counter() - t)
        except torch.OutOfMemoryError:
            rows.append({"micro_batch": batch, "tokens": length, "out_of_memory": True})
            print(json.dumps(rows[-1]), flush=True)
            opt.zero_grad(set_to_none=True)
            continue
        sec = statistics.median(times)
        rows.append({"micro_batch": batch, "tokens": length, "step_s": round(sec, 4),
                     "tokens_per_s": round(batch * length / sec),
                     "tflops": round(step_flops(cfg, non_embed, batch, length) / sec / 1e12, 1),
                     "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if cuda else None})
        print(json.dumps(rows[-1]), flush=True)
    return {"gpu": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
            "transformers": __import__("transformers").__version__, "peft": __import__("peft").__version__,
            "model": "tiny llama" if tiny else "Llama-3.1-8B architecture, random weights", "dtype": "bfloat16",
            "attention": "sdpa", "lora": vars(RECIPE_LORA), "trainable_params": trainable,
            "params_non_embedding": non_embed, "target_tokens": target, "timed_steps": steps,
            "build_s": round(build_s, 1), "rows": rows}


def parse_shape(text: str) -> tuple[int, int]:
    try:
        batch, length = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is MICROBATCHxTOKENS, e.g. 2x4096") from None
    if batch < 1 or length < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: micro-batch ≥ 1 and tokens ≥ 2")
    return batch, length


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", type=parse_shape, nargs="+",
                   default=[(1, 2048), (2, 2048), (2, 4096), (1, 8192)], help="MICROBATCHxTOKENS ...")
    p.add_argument("--target", type=int, default=64, help="target (loss) tokens at the end of each sequence")
    p.add_argument("--steps", type=int, default=3, help="timed steps per shape, after one warm-up step")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="a 2-layer, 64-wide model: checks the code, measures nothing")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if any(length <= args.target for _, length in args.shapes):
        p.error(f"every shape needs more tokens than --target ({args.target})")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_sft_step: no CUDA device (this script measures a GPU; --tiny --device cpu checks it)")
    emit(measure(args.shapes, device=args.device, tiny=args.tiny, target=args.target, steps=args.steps), args.out)


if __name__ == "__main__":
    main()
