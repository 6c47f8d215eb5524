"""Prefill throughput of a Llama-3.1-8B-shaped model on one CUDA GPU, at long contexts.

The projection in docs/vllm.md ("Projection to an 8×H100 node") turns the token counts measured
on vLLM's scheduler (``perf/long_context.py``) into hours of GPU time. This script replaces the
published-peak guess in that projection with a measured rate: it builds the architecture of
``configs/models/llama-3.1-8b-instruct.json`` with **random weights** (no download: the rate of
a forward pass does not depend on the values) in bfloat16 with PyTorch's SDPA attention, and
times one prefill (a forward pass over the whole prompt, hidden states only, the LM head on the
last position) per context length. Reported per length: seconds, tokens/s, and the achieved
TFLOP/s from the usual count (2 × non-embedding parameters per token, plus causal attention
2 × 2 × layers × hidden × L² / 2).

This is transformers' eager prefill, not vLLM's kernels: vLLM's (paged flash attention, CUDA
graphs do not matter for prefill) are at least as fast, so the figure is a floor for vLLM.

Usage (on a machine with a CUDA GPU, torch and transformers)::

    python perf/gpu_prefill.py                       # lengths 4k..128k, JSON on stdout
    python perf/gpu_prefill.py --lengths 8192 32768 --out prefill.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "models" / "llama-3.1-8b-instruct.json"


def build(device: str, **overrides):
    """The architecture with random bfloat16 weights on ``device``; ``overrides``: config fields replaced (a
    smaller model for a check)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = {k: v for k, v in json.loads(CONFIG.read_text()).items() if not k.startswith("_")}
    fields.pop("torch_dtype", None)
    fields.update(overrides)
    cfg = LlamaConfig(**fields, rope_theta=500000.0)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    return cfg, model.eval()


def non_embedding(model) -> int:
    """Parameters outside the token embedding and the LM head (the ones a token's matrix products use)."""
    return sum(p.numel() for p in model.parameters()) - model.model.embed_tokens.weight.numel() \
        - model.lm_head.weight.numel()


def flops(cfg, params_non_embedding: int, length: int) -> float:
    dense = 2.0 * params_non_embedding * length
    attention = 2.0 * 2.0 * cfg.num_hidden_layers * cfg.hidden_size * length * length / 2.0
    return dense + attention


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384, 32768, 65536, 131072])
    p.add_argument("--repeats", type=int, default=2, help="timed passes per length (the fastest is kept)")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_prefill: no CUDA device (this script measures a GPU)")

    t0 = time.perf_counter()
    cfg, model = build("cuda")
    build_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    non_embed = non_embedding(model)
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    with torch.inference_mode():
        warm = torch.randint(0, cfg.vocab_size, (1, 2048), device="cuda", generator=gen)
        model.lm_head(model.model(input_ids=warm).last_hidden_state[:, -1])
        torch.cuda.synchronize()
        for length in args.lengths:
            ids = torch.randint(0, cfg.vocab_size, (1, length), device="cuda", generator=gen)
            torch.cuda.reset_peak_memory_stats()
            times = []
            for _ in range(args.repeats):
                torch.cuda.synchronize()
                t = time.perf_counter()
                hidden = model.model(input_ids=ids).last_hidden_state
                model.lm_head(hidden[:, -1])
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t)
                del hidden
            best = min(times)
            rows.append({"tokens": length, "seconds": round(best, 4), "tokens_per_s": round(length / best),
                         "tflops": round(flops(cfg, non_embed, length) / best / 1e12, 1),
                         "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1)})
            print(json.dumps(rows[-1]), flush=True)
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "transformers": __import__("transformers").__version__, "params": n_params,
              "params_non_embedding": non_embed, "build_s": round(build_s, 1), "dtype": "bfloat16",
              "attention": "sdpa", "rows": rows}
    emit(result, args.out)


def emit(result: dict, out: Path | None) -> None:
    """The result as indented JSON on stdout, and in ``out`` where given."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        out.write_text(text)


if __name__ == "__main__":
    main()
