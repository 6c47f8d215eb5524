"""perf/gpu_sft_step.py on CPU with a 2-layer model: it runs the SFT code's own LoRA wrapper and optimizer step, and
that step trains (the GPU figures in docs/sft.md come from the same code)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

PERF = Path(__file__).resolve().parents[2] / "perf"


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(PERF))  # the script imports its sibling gpu_prefill, as when run as `python perf/...`
    try:
        spec = importlib.util.spec_from_file_location("gpu_sft_step", PERF / "gpu_sft_step.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(PERF))


def test_measures_each_shape_with_the_recipe_lora(script):
    out = script.measure([(2, 64), (1, 96)], device="cpu", tiny=True, target=8, steps=1)
    assert [(r["micro_batch"], r["tokens"]) for r in out["rows"]] == [(2, 64), (1, 96)]
    assert all(r["step_s"] > 0 and r["tokens_per_s"] > 0 for r in out["rows"])
    # r 16 on q_proj (64 → 64) and v_proj (64 → 2 kv heads × 16) in each of the 2 layers
    assert out["trainable_params"] == 2 * (16 * (64 + 64) + 16 * (64 + 32))
    assert out["lora"]["target_modules"] == ["q_proj", "v_proj"]


def test_the_sft_step_lowers_the_loss_on_its_batch(script):
    import torch

    loop = script.sft_loop()
    cfg, base = script.build("cpu", **script.TINY)
    model = loop.with_lora(base.float(), SimpleNamespace(r=4, alpha=8, dropout=0.0, target_modules=["q_proj"]), 0)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    ids = torch.randint(1, cfg.vocab_size, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    batch = [[SimpleNamespace(input_ids=ids, labels=[-100] * 30 + ids[30:])]]
    losses = [loop.train_step(model, opt, sched, batch, 0, torch.device("cpu"), 1.0) for _ in range(8)]
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] - 0.1, losses


def test_a_bad_shape_is_refused_with_its_text(script):
    assert script.parse_shape("2x4096") == (2, 4096)
    with pytest.raises(argparse.ArgumentTypeError, match="'4096': a shape is MICROBATCHxTOKENS"):
        script.parse_shape("4096")
