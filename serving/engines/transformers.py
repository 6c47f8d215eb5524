"""transformers engine: any HF causal-LM directory, or a base model plus a peft LoRA adapter.

Useful where neither vLLM nor a GGUF exists — an SFT adapter straight out of ``llmrec sft``,
a CPU box, a GPU without vLLM. Greedy (or sampled) generation with ``model.generate``; one
request at a time (no padding, so outputs do not depend on batch neighbours).

Prompts: the tokenizer's chat template when it has one, else Gemma turns or plain
``User:/Assistant:`` lines (``prompt_format``; the same renderers as the llama.cpp engine,
and the same ones ``llmrec sft`` trains with — see ``render_prompt``).

Constraints: ``choices`` are scored — the choice whose tokens have the highest summed
log-probability after the prompt wins (one batched forward pass over all choices);
``json_schema`` uses lm-format-enforcer's prefix-allowed-tokens function with
``model.generate``. Without lm-format-enforcer, a schema whose every valid document can be
listed (enums, fixed-length arrays of enums: the PerRecBench schemas) is scored like
choices over those documents; any other schema is generated unconstrained (documented
fallback; the benchmark's parser judges the text).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from llmrec.errors import ContextOverflow, EngineError, MissingDependency
from llmrec.serving.engine import (EngineBase, EngineConfig, config_identity, engine_args, path_tail,
                                   register_engine)
from llmrec.serving.chat_formats import OWN_FORMATS, render_gemma, render_plain
from llmrec.types import Constraint, Message, Request, Result

log = logging.getLogger(__name__)
MAX_ENUMERATED = 720  # a schema with more valid documents than this is not enumerated


class TransformersEngineConfig(EngineConfig):
    type: Literal["transformers"] = "transformers"
    model: str = Field("embedded", description="HF model directory; 'embedded' = the embedded Gemma 3 270M "
                       "converted once from its GGUF into the per-user cache")
    adapter: Path | None = Field(None, description="peft LoRA adapter directory applied on top of `model`")
    prompt_format: Literal["auto", "chat", "gemma", "plain"] = Field(
        "auto", description="chat: the tokenizer's chat template; gemma: Gemma turns; plain: 'User:/Assistant:' "
        "lines; auto = chat if the tokenizer has a template, else gemma (as the llama.cpp engine)")
    device: str = Field("auto", description="torch device: auto (cuda if available), cpu, cuda, cuda:1 ...")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights dtype; auto = float32 on CPU, bfloat16 on GPU")
    n_threads: int | None = Field(None, ge=1, description="torch CPU threads; None = the CPUs Ray assigned, "
                                  "else all usable CPUs")
    max_context: int = Field(8192, ge=16, description="prompt + completion token limit when `context_length` "
                             "is unset (also capped by the model's max_position_embeddings)")

    @property
    def label(self) -> str:
        return path_tail(self.model)


def _format(tokenizer, prompt_format: str) -> str:
    if prompt_format == "auto":
        return "chat" if getattr(tokenizer, "chat_template", None) else "gemma"
    return prompt_format


def own_format(tokenizer, prompt_format: str) -> bool:
    """Whether prompts are rendered in one of llmrec's own chat formats (not the tokenizer's template)."""
    return _format(tokenizer, prompt_format) in OWN_FORMATS


def render_prompt(tokenizer, messages: list[Message], prompt_format: str) -> str:
    """Messages → prompt text (shared with ``llmrec sft``, so training and evaluation agree)."""
    fmt = _format(tokenizer, prompt_format)
    if fmt == "chat":
        return tokenizer.apply_chat_template([m.model_dump() for m in messages], tokenize=False,
                                             add_generation_prompt=True)
    return render_gemma(messages) if fmt == "gemma" else render_plain(messages)


def enumerate_schema(schema: dict) -> list[str] | None:
    """Every valid document of a finite schema (objects of enums / fixed-length enum arrays), as
    compact JSON, or None when the schema is not of that shape or has too many documents."""
    def values(node: dict) -> list | None:
        if "enum" in node:
            return list(node["enum"])
        if "const" in node:
            return [node["const"]]
        if node.get("type") == "array" and node.get("minItems") == node.get("maxItems") is not None:
            inner = values(node.get("items") or {})
            n = node["minItems"]
            if inner is None or len(inner) ** n > 10 * MAX_ENUMERATED:
                return None
            return [list(t) for t in itertools.product(inner, repeat=n)
                    if not node.get("uniqueItems") or len(set(map(json.dumps, t))) == n]
        if node.get("type") == "object" and node.get("properties"):
            props = node["properties"]
            if set(node.get("required", [])) != set(props):
                return None
            parts = [values(props[k]) for k in props]
            if any(p is None for p in parts):
                return None
            return [dict(zip(props, combo)) for combo in itertools.product(*parts)]
        return None

    docs = values(schema)
    if docs is None or not 0 < len(docs) <= MAX_ENUMERATED:
        return None
    return [json.dumps(d) for d in docs]


@register_engine("transformers", TransformersEngineConfig)
class TransformersEngine(EngineBase):
    def __init__(self, config: TransformersEngineConfig):
        self.config = config
        self._model = self._tok = None
        self._lock = threading.Lock()
        self._json_fns: dict[str, object] = {}

    # -- set-up ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._model is not None:
            return
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise MissingDependency("transformers engine", "transformers torch", "sft") from e
        from llmrec.serving.local import default_threads
        from llmrec.serving.hf_model import resolve_model_dir

        cfg, t0 = self.config, time.perf_counter()
        self._torch = torch
        device = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cpu":
            torch.set_num_threads(cfg.n_threads or default_threads())
        dtype = cfg.dtype if cfg.dtype != "auto" else ("float32" if device == "cpu" else "bfloat16")
        path = resolve_model_dir(cfg.model)
        self._tok = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
        if cfg.adapter is not None:
            model = self._with_adapter(model, Path(cfg.adapter).expanduser())
        self._model = model.to(device).eval()
        self._device, self._path = device, path
        limits = [cfg.context_length or cfg.max_context,
                  getattr(model.config, "max_position_embeddings", None) or cfg.max_context]
        self._limit = min(limits)
        log.info("transformers loaded %s%s in %.1fs on %s (%s)", path, f" + {cfg.adapter}" if cfg.adapter else "",
                 time.perf_counter() - t0, device, dtype)

    @staticmethod
    def _with_adapter(model, adapter: Path):
        try:
            from peft import PeftModel
        except ImportError as e:
            raise MissingDependency("LoRA adapters in the transformers engine", "peft", "sft") from e
        if not (adapter / "adapter_config.json").is_file():
            raise EngineError(f"engine.adapter: {adapter} has no adapter_config.json (a peft adapter directory)")
        return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()

    def provenance(self) -> dict:
        """The arguments after defaults, transformers' and torch's versions; once started: the model folder's
        weight and tokenizer files by sha256, the device and dtype used, the chat template's hash."""
        from llmrec.provenance import model_identity, package_versions, text_sha256

        out = {"engine_args": engine_args(self.config),
               "packages": package_versions(("transformers", "tokenizers", "torch", "peft"))}
        if self._model is not None:
            out["model"] = model_identity(self._path)
            if self.config.adapter is not None:
                out["adapter"] = model_identity(Path(self.config.adapter).expanduser())
            out["device"], out["dtype"] = str(self._device), str(self._model.dtype)
            template = getattr(self._tok, "chat_template", None)
            out["chat_template_sha256"] = text_sha256(template) if isinstance(template, str) else None
            if str(self._device).startswith("cuda"):
                torch = self._torch
                out["cuda"] = {"torch_cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(self._model.device)}
        return out

    def identity(self) -> dict:
        """Every config field, the thread count included (torch does not promise the same rounding for another
        number of threads), and the adapter weights' mtime."""
        c, extra = self.config, {}
        if c.adapter is not None:
            weights = Path(c.adapter) / "adapter_model.safetensors"
            if weights.is_file():  # a retrained adapter at the same path must not hit old cache entries
                extra["adapter_mtime_ns"] = weights.stat().st_mtime_ns
        return config_identity(c, **extra)

    @property
    def context_limit(self) -> int:
        self.start()
        return self._limit

    # -- prompts --------------------------------------------------------------------------------
    def _ids(self, request: Request, text: str | None = None) -> list[int]:
        text = render_prompt(self._tok, request.messages, self.config.prompt_format) if text is None else text
        ids = self._tok(text, add_special_tokens=False)["input_ids"]
        bos = self._tok.bos_token_id
        return ids if bos is None or (ids and ids[0] == bos) else [bos] + ids

    def count_tokens(self, request: Request) -> int:
        with self._lock:
            self.start()
            return len(self._ids(request))

    # -- decoding -------------------------------------------------------------------------------
    def _score(self, ids: list[int], choices: list[str]) -> tuple[str, int]:
        """The choice with the highest summed log-probability after the prompt."""
        torch = self._torch
        conts = [self._tok(c, add_special_tokens=False)["input_ids"] or [self._tok.eos_token_id] for c in choices]
        width = max(map(len, conts))
        pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        rows = [ids + c + [pad] * (width - len(c)) for c in conts]
        mask = [[1] * (len(ids) + len(c)) + [0] * (width - len(c)) for c in conts]
        with torch.no_grad():
            logits = self._model(input_ids=torch.tensor(rows, device=self._device),
                                 attention_mask=torch.tensor(mask, device=self._device)).logits
        logp = torch.log_softmax(logits[:, len(ids) - 1:-1].float(), dim=-1)
        totals = [float(sum(logp[i, j, t] for j, t in enumerate(c))) for i, c in enumerate(conts)]
        best = max(range(len(choices)), key=lambda i: totals[i])
        return choices[best], len(conts[best])

    def _json_fn(self, schema: dict):
        key = json.dumps(schema, sort_keys=True)
        if key not in self._json_fns:
            try:
                from lmformatenforcer import JsonSchemaParser
                from lmformatenforcer.integrations.transformers import build_transformers_prefix_allowed_tokens_fn
            except ImportError:
                self._json_fns[key] = None
            else:
                self._json_fns[key] = build_transformers_prefix_allowed_tokens_fn(self._tok, JsonSchemaParser(schema))
        return self._json_fns[key]

    def _generate(self, ids: list[int], request: Request, allowed=None) -> tuple[str, int, str]:
        torch, s = self._torch, request.sampling
        kwargs = {"do_sample": s.temperature > 0, "max_new_tokens": s.max_tokens,
                  "pad_token_id": self._tok.pad_token_id or self._tok.eos_token_id}
        if s.temperature > 0:
            kwargs.update(temperature=s.temperature, top_p=s.top_p, top_k=0)
            torch.manual_seed(s.seed if s.seed is not None else 0)
        if s.stop:
            kwargs.update(stop_strings=list(s.stop), tokenizer=self._tok)
        if allowed is not None:
            kwargs["prefix_allowed_tokens_fn"] = allowed
        with torch.no_grad():
            out = self._model.generate(torch.tensor([ids], device=self._device),
                                       attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=self._device),
                                       **kwargs)
        new = out[0, len(ids):].tolist()
        eos = self._model.generation_config.eos_token_id
        eos = {self._tok.eos_token_id, *(eos if isinstance(eos, list) else [eos])}
        finish = "stop" if (new and new[-1] in eos) or len(new) < s.max_tokens else "length"
        text = self._tok.decode(new, skip_special_tokens=True)
        for stop in s.stop:
            if stop in text:
                text, finish = text[: text.index(stop)], "stop"
        return text, len(new), finish

    def _one(self, request: Request, ids: list[int]) -> Result:
        t0, c = time.perf_counter(), request.constraint
        finish = "stop"
        if c is not None and c.choices is not None:
            text, n_out = self._score(ids, c.choices)
        elif c is not None and self._json_fn(c.json_schema) is not None:
            text, n_out, finish = self._generate(ids, request, self._json_fn(c.json_schema))
        elif c is not None and (docs := enumerate_schema(c.json_schema)) is not None:
            text, n_out = self._score(ids, docs)
        else:
            text, n_out, finish = self._generate(ids, request)
        return Result(text=text, prompt_tokens=len(ids), completion_tokens=n_out, finish_reason=finish,
                      latency_s=time.perf_counter() - t0, request_id=request.request_id)

    def generate(self, requests: list[Request]) -> list[Result]:
        with self._lock:
            self.start()
            out: list[Result] = []
            own = own_format(self._tok, self.config.prompt_format)
            for req in requests:
                prompt = render_prompt(self._tok, req.messages, self.config.prompt_format)
                ids = self._ids(req, prompt)
                if len(ids) + req.sampling.max_tokens > self._limit:
                    e = ContextOverflow(len(ids), self._limit, req.sampling.max_tokens)
                    out.append(Result.over_context(req, e))
                else:
                    try:
                        out.append(self._one(req, ids))
                    except (RuntimeError, ValueError) as e:  # this request's decoding failed; the engine lives on
                        log.warning("request %s failed: %s", req.request_id, e)
                        out.append(Result.failure(req, f"transformers: {e}"))
                if own:  # a prompt llmrec rendered goes with its result (the run's transcripts)
                    out[-1].prompt_text = prompt
            return out

    def check_health(self) -> bool:
        return self._model is not None

    def close(self) -> None:
        with self._lock:
            self._model = self._tok = None
