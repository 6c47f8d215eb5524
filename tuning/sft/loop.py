"""The Ray Train worker function: LoRA on an HF causal LM, data-parallel, checkpointed, resumable.

Every worker builds the same deterministic batch order (seeded by epoch) and takes its slice of
each global batch, so a run resumed at step s sees exactly the batches an uninterrupted run
would have. A checkpoint holds the adapter (peft format), the optimizer and scheduler state and
the step; ``ray.train.get_checkpoint()`` hands the latest one back after a restart.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import tempfile
import time
from pathlib import Path

STATE = "trainer_state.pt"


def _batches(n_examples: int, batch: int, epoch: int, seed: int) -> list[list[int]]:
    order = list(range(n_examples))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return [order[i:i + batch] for i in range(0, n_examples, batch)]


def _collate(examples, pad_id: int, device):
    """Left-padded batch: every sequence ends at the last position, so only the last
    ``max target + 1`` positions need logits (Gemma's 262k-token vocabulary makes full logits the
    largest cost of a CPU step)."""
    import torch

    width = max(len(e.input_ids) for e in examples)
    ids = [[pad_id] * (width - len(e.input_ids)) + e.input_ids for e in examples]
    labels = [[-100] * (width - len(e.labels)) + e.labels for e in examples]
    mask = [[0] * (width - len(e.input_ids)) + [1] * len(e.input_ids) for e in examples]
    t = lambda x: torch.tensor(x, device=device)  # noqa: E731
    return t(ids), t(mask), t(labels)


def _loss_sum(model, ids, mask, labels):
    """(summed token loss over target tokens, number of target tokens)."""
    import torch

    keep = int((labels != -100).sum(dim=1).max()) + 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits
    pred, gold = logits[:, :-1].float(), labels[:, -(keep - 1):]
    loss = torch.nn.functional.cross_entropy(pred.reshape(-1, pred.size(-1)), gold.reshape(-1),
                                             ignore_index=-100, reduction="sum")
    return loss, int((gold != -100).sum())


def _eval_loss(model, examples, rank: int, world: int, pad_id: int, device) -> float:
    """Token-weighted loss over the validation set (each worker its share, summed across workers).

    Runs the unwrapped module: a DDP forward may broadcast buffers, a collective that would hang
    when workers hold different numbers of validation examples."""
    import torch
    import torch.distributed as dist

    model = model.module if hasattr(model, "module") else model
    total = torch.zeros(2, dtype=torch.float64, device=device)
    model.eval()
    with torch.no_grad():
        for e in examples[rank::world]:
            loss, n = _loss_sum(model, *_collate([e], pad_id, device))
            total[0] += float(loss)
            total[1] += n
    model.train()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(total)
    return float(total[0] / total[1]) if total[1] else float("nan")


def _build(cfg, model_dir: str, device, restored: Path | None):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    dtype = cfg.scaling.dtype if cfg.scaling.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    if restored is not None:
        return PeftModel.from_pretrained(base, str(restored / "adapter"), is_trainable=True)
    return with_lora(base, cfg.lora, cfg.train.seed)


def with_lora(base, lora, seed: int):
    """``base`` with fresh LoRA adapters as the ``lora:`` section says (r, alpha, dropout, target_modules)."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    return get_peft_model(base, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                           target_modules=list(lora.target_modules), task_type="CAUSAL_LM"))


def train_step(model, opt, sched, micro: list, pad_id: int, device, max_grad_norm: float) -> float:
    """One optimizer step over ``micro`` (this worker's micro-batches, lists of examples), the gradients
    accumulated across them and all-reduced once (DDP) at the last; returns the step's mean loss."""
    import torch

    loss_sum = 0.0
    for j, examples in enumerate(micro):
        sync = j == len(micro) - 1 or not hasattr(model, "no_sync")
        with (model.no_sync() if not sync else contextlib.nullcontext()):
            total_loss, n = _loss_sum(model, *_collate(examples, pad_id, device))
            loss = total_loss / max(n, 1) / len(micro)
            loss.backward()
        loss_sum += loss.item()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], max_grad_norm)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return loss_sum


def train_loop(config: dict) -> None:
    """``config``: {"sft": SFTConfig as JSON, "model_dir": resolved base model directory}."""
    import ray.train
    import ray.train.torch
    import torch
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    from llmrec.models.trainer import load_payload
    from llmrec.tuning.sft.config import SFTConfig
    from llmrec.tuning.sft.data import load_splits

    cfg = SFTConfig.model_validate(config["sft"])
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    if device.type == "cpu":
        torch.set_num_threads(max(1, int(cfg.scaling.cpus_per_worker)))
    tok = AutoTokenizer.from_pretrained(config["model_dir"])
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    train, valid = load_splits(cfg.data, tok, cfg.train.seed)

    ckpt = ray.train.get_checkpoint()
    restored = Path(ckpt.to_directory()) if ckpt is not None else None
    model = ray.train.torch.prepare_model(_build(cfg, config["model_dir"], device, restored))
    t = cfg.train
    per_epoch = math.ceil(len(train) / t.batch_size)
    total = t.max_steps or max(1, math.ceil(t.epochs * per_epoch))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=t.learning_rate,
                            weight_decay=t.weight_decay)
    sched = get_linear_schedule_with_warmup(opt, t.warmup_steps, total)
    step = 0
    if restored is not None:
        state = load_payload(restored / STATE, device)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step = int(state["step"])
    eval_loss = _eval_loss(model, valid, rank, world, pad_id, device) if valid and step == 0 else None
    if step == 0 and eval_loss is not None:
        ray.train.report({"step": 0, "epoch": 0.0, "valid/loss": eval_loss, "examples": len(train)})
    model.train()
    per_worker = t.batch_size // world
    start_step = step
    timed = [0.0, 0]  # seconds and steps of this session (mean step time, eval excluded)
    while step < total:
        t0 = time.perf_counter()
        epoch, k = divmod(step, per_epoch)
        batch = _batches(len(train), t.batch_size, epoch, t.seed)[k]
        mine = batch[rank * per_worker:(rank + 1) * per_worker] or batch[:1]
        micro = [[train[i] for i in mine[j:j + t.micro_batch_size]]
                 for j in range(0, len(mine), t.micro_batch_size)]
        loss_sum = train_step(model, opt, sched, micro, pad_id, device, t.max_grad_norm)
        step += 1
        timed[0] += time.perf_counter() - t0
        timed[1] += 1
        last = step == total
        if valid and (last or (t.eval_every and step % t.eval_every == 0)):
            eval_loss = _eval_loss(model, valid, rank, world, pad_id, device)
        metrics = {"step": step, "epoch": step / per_epoch, "loss": _mean_across(loss_sum, device),
                   "lr": sched.get_last_lr()[0], "step_time_s": time.perf_counter() - t0,
                   "mean_step_time_s": timed[0] / timed[1], "resumed_from_step": start_step}
        if eval_loss is not None:
            metrics["valid/loss"] = eval_loss
        if last or step % t.checkpoint_every == 0:
            _report_with_checkpoint(metrics, model, opt, sched, step, rank)
        else:
            ray.train.report(metrics)


def _mean_across(value: float, device) -> float:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t[0]) / dist.get_world_size()


def _report_with_checkpoint(metrics: dict, model, opt, sched, step: int, rank: int) -> None:
    import ray.train
    import torch

    with tempfile.TemporaryDirectory(prefix="llmrec-sft-ckpt-") as tmp:
        checkpoint = None
        if rank == 0:
            unwrapped = model.module if hasattr(model, "module") else model
            unwrapped.save_pretrained(os.path.join(tmp, "adapter"))
            torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": step},
                       os.path.join(tmp, STATE))
            from llmrec.rundir import RunDir, dumps_json  # the checkpoint's metrics file has the run directory's name

            Path(tmp, RunDir.METRICS).write_text(dumps_json(metrics))
            checkpoint = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report(metrics, checkpoint=checkpoint)
