"""KV-cache budget of a replica from a model's config.json and the GPUs it gets (no engine started).

Figures are planned, not measured: weights = parameters (from the config's shapes) × dtype
bytes; a fixed reserve per GPU stands for activations, CUDA graphs and the runtime; the rest of
``gpu_memory_utilization × memory`` holds KV blocks. vLLM measures its own budget at start
(its log prints "GPU KV cache size: N tokens"); a run can pin the measured figure with
``execution.kv_budget_tokens``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from llmrec.errors import ConfigError

GIB = 1024 ** 3
RESERVE_GIB_PER_GPU = 2.0
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1,
               "fp8_e5m2": 1, "int8": 1}


@dataclass(frozen=True)
class ModelShape:
    layers: int
    kv_heads: int
    head_dim: int
    params: int
    dtype_bytes: int

    @classmethod
    def from_config(cls, c: dict) -> "ModelShape":
        c = c.get("text_config", c)  # multimodal configs nest the language model's
        try:
            layers, heads, hidden = int(c["num_hidden_layers"]), int(c["num_attention_heads"]), int(c["hidden_size"])
        except KeyError as e:
            raise ConfigError(f"model config has no {e.args[0]!r}: need num_hidden_layers, num_attention_heads, "
                              f"hidden_size (a Hugging Face config.json)") from e
        kv_heads = int(c.get("num_key_value_heads") or heads)
        head_dim = int(c.get("head_dim") or hidden // heads)
        inter, vocab = int(c.get("intermediate_size") or 4 * hidden), int(c.get("vocab_size") or 32000)
        attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
        mlp = 3 * hidden * inter
        emb = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
        dtype = str(c.get("torch_dtype") or c.get("dtype") or "bfloat16")
        return cls(layers, kv_heads, head_dim, layers * (attn + mlp) + emb, DTYPE_BYTES.get(dtype, 2))

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto") -> int:
        per = self.dtype_bytes if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]
        return 2 * self.layers * self.kv_heads * self.head_dim * per


@dataclass(frozen=True)
class ReplicaBudget:
    gpus: int
    weight_bytes: int
    kv_bytes: int
    kv_bytes_per_token: int
    block_size: int

    @property
    def kv_tokens(self) -> int:
        blocks = self.kv_bytes // (self.kv_bytes_per_token * self.block_size)
        return max(0, blocks) * self.block_size

    def sequences_at(self, context: int) -> int:
        return self.kv_tokens // context if context else 0


def replica_budget(shape: ModelShape, gpus: int, gpu_memory_gib: float, utilization: float,
                   kv_cache_dtype: str = "auto", block_size: int = 16) -> ReplicaBudget:
    usable = gpus * (gpu_memory_gib * utilization - RESERVE_GIB_PER_GPU) * GIB
    weights = shape.params * shape.dtype_bytes
    return ReplicaBudget(gpus, weights, int(usable - weights), shape.kv_bytes_per_token(kv_cache_dtype), block_size)


def load_model_config(path: Path | None, model: str) -> dict:
    """The config.json: ``path`` if given, else ``<model>/config.json`` when model is a directory."""
    cand = path or (Path(model) / "config.json")
    if not cand.is_file():
        raise ConfigError(f"no model config at {cand}: set engine.model_config_path to the model's config.json "
                          f"(Hugging Face format) so the plan knows its layers and KV heads")
    try:
        return json.loads(cand.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{cand}: not valid JSON: {e}") from e
