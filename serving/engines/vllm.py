"""vLLM offline engine — the production engine on GPUs (import-guarded; ``pip install 'llmrec[vllm]'``).

Prompts are rendered with the model's chat template and tokenized here, then sent to
``LLM.generate`` as token ids, so ``count_tokens``, the context check and the reported
``prompt_tokens`` all use the same tokens. Constraints use vLLM structured outputs
(``StructuredOutputsParams(choice=...|json=...)``; releases before 0.11 named it
``GuidedDecodingParams`` / ``guided_decoding``). ``cached_prompt_tokens`` is the
``num_cached_tokens`` vLLM reports from automatic prefix caching.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from pydantic import Field, model_validator

from llmrec.errors import ContextOverflow, EngineError, MissingDependency
from llmrec.serving.engine import EngineConfig, register_engine
from llmrec.types import Request, Result

log = logging.getLogger(__name__)


class VLLMEngineConfig(EngineConfig):
    type: Literal["vllm"] = "vllm"
    model: str = Field(description="Hugging Face id or local directory of the model")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one model instance is split over")
    max_model_len: int | None = Field(None, ge=1, description="context length; None = the model's own")
    enable_prefix_caching: bool = Field(True, description="reuse the KV cache of shared prompt prefixes")
    enable_chunked_prefill: bool | None = Field(None, description="split long prefills; None = vLLM's default")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="share of GPU memory vLLM may take")
    kv_cache_dtype: str = Field("auto", description="KV-cache dtype, e.g. auto or fp8")
    dtype: str = Field("auto", description="weight/activation dtype, e.g. auto, bfloat16, float16")
    enforce_eager: bool = Field(False, description="disable CUDA graphs (faster start, slower decode)")
    seed: int = Field(0, description="engine seed; a request's own seed wins")
    merge_system: bool = Field(
        False, description="prepend system text to the first user message (for chat templates without a system role)")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="other vllm.LLM arguments, passed as is")

    @model_validator(mode="after")
    def _no_shadowing(self) -> "VLLMEngineConfig":
        named = set(type(self).model_fields) - {"type", "context_length", "engine_kwargs", "merge_system"}
        clash = sorted(named & set(self.engine_kwargs))
        if clash:
            raise ValueError(f"set {', '.join(clash)} as engine keys, not inside engine_kwargs")
        return self


def llm_kwargs(c: VLLMEngineConfig) -> dict[str, Any]:
    """The ``vllm.LLM(...)`` arguments a config stands for."""
    kw: dict[str, Any] = {
        "model": c.model, "tensor_parallel_size": c.tensor_parallel_size,
        "enable_prefix_caching": c.enable_prefix_caching, "gpu_memory_utilization": c.gpu_memory_utilization,
        "kv_cache_dtype": c.kv_cache_dtype, "dtype": c.dtype, "enforce_eager": c.enforce_eager, "seed": c.seed}
    max_len = c.max_model_len or c.context_length
    if max_len is not None:
        kw["max_model_len"] = max_len
    if c.enable_chunked_prefill is not None:
        kw["enable_chunked_prefill"] = c.enable_chunked_prefill
    return {**kw, **c.engine_kwargs}


def sampling_kwargs(request: Request) -> dict[str, Any]:
    """``vllm.SamplingParams`` arguments (the constraint stays separate: its class varies by release)."""
    s = request.sampling
    kw: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens}
    if s.stop:
        kw["stop"] = list(s.stop)
    if s.seed is not None:
        kw["seed"] = s.seed
    return kw


def conversation(request: Request, merge_system: bool) -> list[dict]:
    msgs = [m.model_dump() for m in request.messages]
    if not merge_system:
        return msgs
    system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
    rest = [m for m in msgs if m["role"] != "system"]
    if system:
        if rest and rest[0]["role"] == "user":
            rest[0] = {"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}
        else:
            rest.insert(0, {"role": "user", "content": system})
    return rest


@register_engine("vllm", VLLMEngineConfig)
class VLLMEngine:
    thread_safe = False

    def __init__(self, config: VLLMEngineConfig):
        self.config = config
        self._llm = None

    def start(self) -> None:
        if self._llm is not None:
            return
        try:
            import vllm
        except ImportError as e:
            raise MissingDependency("vllm engine", "vllm", "vllm") from e
        self._vllm = vllm
        self._llm = vllm.LLM(**llm_kwargs(self.config))
        self._tokenizer = self._llm.get_tokenizer()
        self._max_len = int(self._llm.llm_engine.model_config.max_model_len)
        log.info("vLLM %s loaded %s (max_model_len=%d)", vllm.__version__, self.config.model, self._max_len)

    def identity(self) -> dict:
        c = self.config
        return {"type": "vllm", "model": c.model, "dtype": c.dtype, "kv_cache_dtype": c.kv_cache_dtype,
                "seed": c.seed, "merge_system": c.merge_system, "engine_kwargs": c.engine_kwargs}

    @property
    def context_limit(self) -> int:
        return min(self._max_len, self.config.context_length or self._max_len)

    def _tokens(self, request: Request) -> list[int]:
        self.start()
        text = self._tokenizer.apply_chat_template(conversation(request, self.config.merge_system),
                                                   tokenize=False, add_generation_prompt=True)
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def count_tokens(self, request: Request) -> int:
        return len(self._tokens(request))

    def _sampling(self, request: Request):
        kw = sampling_kwargs(request)
        c = request.constraint
        if c is not None:
            spec = {"choice": c.choices} if c.choices is not None else {"json": c.json_schema}
            try:
                from vllm.sampling_params import StructuredOutputsParams
                kw["structured_outputs"] = StructuredOutputsParams(**spec)
            except ImportError:  # vLLM < 0.11
                from vllm.sampling_params import GuidedDecodingParams
                kw["guided_decoding"] = GuidedDecodingParams(**spec)
        return self._vllm.SamplingParams(**kw)

    def generate(self, requests: list[Request]) -> list[Result]:
        self.start()
        prompts = [self._tokens(r) for r in requests]
        results: list[Result | None] = [None] * len(requests)
        for i, (req, ids) in enumerate(zip(requests, prompts)):
            if len(ids) + req.sampling.max_tokens > self.context_limit:
                e = ContextOverflow(len(ids), self.context_limit, req.sampling.max_tokens)
                results[i] = Result.over_context(req, len(ids), str(e))
        fit = [i for i in range(len(requests)) if results[i] is None]
        if not fit:
            return results  # type: ignore[return-value]
        t0 = time.perf_counter()
        try:
            outs = self._llm.generate([{"prompt_token_ids": prompts[i]} for i in fit],
                                      [self._sampling(requests[i]) for i in fit], use_tqdm=False)
        except (RuntimeError, ValueError) as e:
            raise EngineError(f"vLLM failed: {e}") from e
        latency = time.perf_counter() - t0  # offline batches finish together
        for i, out in zip(fit, outs):
            req, ids = requests[i], prompts[i]
            comp = out.outputs[0]
            results[i] = (Result(
                text=comp.text, prompt_tokens=len(ids), completion_tokens=len(comp.token_ids),
                cached_prompt_tokens=int(getattr(out, "num_cached_tokens", 0) or 0),
                finish_reason="length" if comp.finish_reason == "length" else "stop",
                latency_s=latency, request_id=req.request_id))
        return results  # type: ignore[return-value]

    def check_health(self) -> bool:
        return self._llm is not None

    def close(self) -> None:
        self._llm = None
