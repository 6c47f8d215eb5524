"""``llmrec sft merge``: linear weight merging of fine-tuned variants, and adapter → base merging.

The PerRecBench paper (§5) merges single-format models as θ = α·θ_pt + β·θ_pr + (1−α−β)·θ_ls.
Each input is a peft adapter directory (θ_i = base with the adapter merged in) or a full HF model
directory (θ_i as saved). The result is θ = (1 − Σw)·θ_base + Σ w_i·θ_i — with weights summing
to 1 (the paper's case) the base drops out, and for LoRA inputs this equals the base plus the
weighted sum of the adapters' low-rank updates. One input with weight 1 merges that adapter into
its base. The output is a full HF model directory (weights, config, tokenizer) that the
transformers engine loads as ``model:`` (and that converts to GGUF with llama.cpp's converter).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from llmrec.errors import ConfigError

log = logging.getLogger(__name__)


def is_adapter(path: Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def combine(states: list[dict], weights: list[float]) -> dict:
    """Σ w_i · state_i for floating tensors; other tensors must agree and are taken as they are."""
    if len(states) != len(weights) or not states:
        raise ConfigError(f"{len(states)} state dicts for {len(weights)} weights")
    keys = set(states[0])
    for i, s in enumerate(states[1:], 1):
        if set(s) != keys:
            raise ConfigError(f"input {i} has different tensors than input 0: "
                              f"{sorted(keys ^ set(s))[:5]} ...")
    out = {}
    for k in states[0]:
        first = states[0][k]
        if first.is_floating_point():
            acc = first.double() * weights[0]
            for s, w in zip(states[1:], weights[1:]):
                acc += s[k].double() * w
            out[k] = acc.to(first.dtype)
        else:
            out[k] = first
    return out


def _merged_state(base_dir: Path | None, path: Path, dtype) -> dict:
    from transformers import AutoModelForCausalLM

    if not is_adapter(path):
        return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).state_dict()
    from peft import PeftModel

    if base_dir is None:
        raise ConfigError(f"{path} is a LoRA adapter: give --base (the model it was trained on)")
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=dtype)
    return PeftModel.from_pretrained(model, str(path)).merge_and_unload().state_dict()


def merge(inputs: list[Path], weights: list[float], out: Path, base: Path | None = None) -> dict:
    """Write θ = (1 − Σw)·θ_base + Σ w_i·θ_i to ``out``; returns the recipe (also ``merge.json``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if len(inputs) != len(weights):
        raise ConfigError(f"{len(inputs)} inputs but {len(weights)} weights; give one --weight per --input")
    rest = 1.0 - math.fsum(weights)
    if abs(rest) > 1e-9 and base is None:
        raise ConfigError(f"the weights sum to {math.fsum(weights)}: the remaining {rest:+g} goes to the base "
                          "model, so give --base (or weights summing to 1)")
    template = base or inputs[0]
    states, ws = [], list(weights)
    for path, w in zip(inputs, weights):
        states.append(_merged_state(base, Path(path), torch.float32))
        log.info("merge: %s x %g", path, w)
    if abs(rest) > 1e-9:
        states.append(AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32).state_dict())
        ws.append(rest)
    merged = combine(states, ws)
    model = AutoModelForCausalLM.from_pretrained(str(template), dtype=torch.float32) if not is_adapter(template) \
        else AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    model.load_state_dict(merged)
    out = Path(out)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(base if base is not None else inputs[0])).save_pretrained(out)
    recipe = {"base": str(base) if base else None, "inputs": [str(p) for p in inputs], "weights": list(weights),
              "base_weight": rest, "formula": "theta = base_weight*theta_base + sum_i weights[i]*theta_i"}
    (out / "merge.json").write_text(json.dumps(recipe, indent=1) + "\n", encoding="utf-8")
    return recipe
