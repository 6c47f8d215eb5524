"""A cached answer is reused only where the engine asking could have produced it.

- every engine's identity (the request cache key) holds every setting of its config but the few each config class
  lists, with a reason, in ``not_in_identity``: a new field is in the key unless someone says why it cannot matter;
- a matrix of setting changes per engine, through the engines' own ``identity()``;
- a warm cache gives what ``--no-cache`` gives, over the toy benchmark's stages (over-context samples, truncation,
  loop rounds), for a matrix of fake-engine settings;
- a hit whose prompt does not fit the asking engine's context is not taken, even when its key matches (an engine
  whose identity leaves its context out, as the llama.cpp engine's once did).
"""

from __future__ import annotations

import shutil

import pytest

from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.cache import CachedEngine, RequestCache
from llmrec.serving.engine import ENGINES, build_engine, config_identity, engine_config
from llmrec.errors import ContextOverflow
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig
from llmrec.types import Result
from tests.pipelines.toy.benchmark import NAME

REQUIRED = {"openai": {"model": "m"}, "vllm": {"model": "m"}}


def minimal(kind: str, tmp_path) -> dict:
    extra = {"model_path": str(tmp_path / "m.gguf")} if kind == "llamacpp" else {}
    return {"type": kind, **REQUIRED.get(kind, {}), **extra}


@pytest.fixture
def gguf(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF not really a model")
    return tmp_path / "m.gguf"


@pytest.mark.parametrize("kind", sorted(ENGINES.names()))
def test_every_config_field_is_in_the_identity_unless_listed_with_a_reason(kind, tmp_path, gguf):
    spec = ENGINES.get(kind)
    cfg = engine_config(minimal(kind, tmp_path))
    left_out = spec.config_cls.not_in_identity
    assert set(left_out) <= set(spec.config_cls.model_fields), "not_in_identity names a field the config lacks"
    assert all(isinstance(why, str) and len(why) > 10 for why in left_out.values()), "each needs its reason"
    assert {"type", "context_length"}.isdisjoint(left_out)
    ident = build_engine(cfg).identity()
    must = set(spec.config_cls.model_fields) - set(left_out)
    assert must <= set(ident), f"{kind}: {sorted(must - set(ident))} missing from identity()"
    assert config_identity(cfg).items() <= ident.items() or kind == "openai"  # openai redacts its base_url


# (setting, value): each must change the engine's identity; the second list: each must not
CHANGES = {
    "llamacpp": ([("n_ctx", 4096), ("context_length", 2048), ("prompt_format", "plain"), ("choice_mode", "score"),
                  ("seed", 1), ("n_batch", 256), ("min_eval_chunk", 8), ("reuse_prefix", False),
                  ("use_extra_bufts", True)],
                 [("n_threads", 3)]),
    "transformers": ([("max_context", 4096), ("context_length", 1024), ("dtype", "float16"), ("device", "cpu"),
                      ("prompt_format", "plain"), ("n_threads", 2), ("adapter", "/a/b"), ("model", "other")],
                     []),
    "vllm": ([("max_model_len", 4096), ("context_length", 2048), ("dtype", "float16"), ("kv_cache_dtype", "fp8"),
              ("engine_kwargs", {"quantization": "awq"}), ("tensor_parallel_size", 2), ("block_size", 32),
              ("enforce_eager", True), ("seed", 1), ("prompt_format", "plain"), ("merge_system", True),
              ("lora_config", {"max_num_adapters_per_replica": 2})],
             [("max_num_seqs", 8), ("gpu_memory_utilization", 0.5), ("enable_prefix_caching", False),
              ("base_url", "http://127.0.0.1:8000/app/v1"), ("request_timeout_s", 5.0), ("gpu_memory_gib", 40.0)]),
    "openai": ([("model", "other"), ("constraint_style", "none"), ("context_length", 2048),
                ("base_url", "http://10.0.0.9:8000/v1")],
               [("timeout_s", 5.0), ("max_concurrency", 2), ("api_key_env", "KEY"), ("rate_limit_wait_s", 1.0)]),
    "fake": ([("context_length", 10), ("default", "no"), ("rules", [{"contains": "a", "reply": "b"}]),
              ("model", "other"), ("report_pid", True), ("fail_first", 1)],
             [("delay_s", 0.5), ("start_log", "/tmp/x")]),
}


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_settings_that_change_answers_or_failures_change_the_identity(kind, tmp_path, gguf):
    base = minimal(kind, tmp_path)
    ident = build_engine(base).identity()
    changing, neutral = CHANGES[kind]
    for key, value in changing:
        assert build_engine({**base, key: value}).identity() != ident, f"{kind}.{key} is not in the identity"
    for key, value in neutral:
        assert build_engine({**base, key: value}).identity() == ident, f"{kind}.{key} should not split the cache"


def test_the_llamacpp_model_is_its_content_not_its_folder(tmp_path, gguf):
    (tmp_path / "copy").mkdir()
    shutil.copy(gguf, tmp_path / "copy" / "m.gguf")
    here = build_engine({"type": "llamacpp", "model_path": str(gguf)}).identity()
    there = build_engine({"type": "llamacpp", "model_path": str(tmp_path / "copy" / "m.gguf")}).identity()
    assert here == there and "model_path" not in here and here["model"] == "m.gguf" and len(here["sha256"]) == 64


# ---- warm cache == no cache --------------------------------------------------------------------------------------

BASE = {"type": "fake", "context_length": 60, "default": "yes"}
MATRIX = [  # each row: what the cache was warmed with → what asks it
    ({}, {"context_length": 7}),  # a smaller context: some prompts no longer fit
    ({"context_length": 7}, {}),  # a larger one: what failed before is answered now
    ({}, {"context_length": None}),
    ({}, {"default": "no"}),
    ({}, {"rules": [{"contains": "question 3", "reply": "no"}]}),
    ({}, {"model": "another"}),
    ({}, {"fail_first": 1}),
    ({}, {"delay_s": 0.001}),  # no change in answers: the warm run takes them from the cache
]


def answers(rows: list[dict]) -> dict[str, tuple]:
    """What a run's numbers come from: per sample its status, answers, failed stage and each call's result."""
    keep = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "context_limit")
    out = {}
    for r in rows:
        calls = []
        for stage, o in sorted((r.get("outputs") or {}).items()):
            for c in o if isinstance(o, list) else [o]:
                calls.append((stage, tuple(c.get(k) for k in keep)))
        out[r["sample_id"]] = (r["status"], r.get("answer"), r.get("follow_ups"), r.get("failed_stage"),
                               r.get("correct"), tuple(calls))
    return out


def toy_run(engine, long=(1,), truncate=False) -> list[dict]:
    bench = get_benchmark(NAME)
    cfg = benchmark_config({"name": NAME, "n": 6, "rounds": 2, "long": list(long), "truncate": truncate})
    return process_samples(bench, cfg, bench.build_samples(cfg, None), lambda role: engine, retries=1, backoff_s=0.0)


@pytest.mark.parametrize("truncate", [False, True])
@pytest.mark.parametrize("warmed, asking", MATRIX)
def test_a_warm_cache_gives_what_no_cache_gives(tmp_path, warmed, asking, truncate):
    cache = RequestCache(tmp_path / "c.sqlite")
    toy_run(CachedEngine(build_engine({**BASE, **warmed}), cache, "runs/a"), truncate=truncate)
    cold = toy_run(build_engine({**BASE, **asking}), truncate=truncate)
    warm_engine = CachedEngine(build_engine({**BASE, **asking}), cache, "runs/b")
    warm = toy_run(warm_engine, truncate=truncate)
    assert answers(warm) == answers(cold)
    if not warmed and asking == {"delay_s": 0.001} and not truncate:
        # nothing that matters changed: every answer came from the cache; only refusals (never cached) were asked again
        refused = sum(c[1][1] == "over_context" for a in answers(warm).values() for c in a[-1])
        assert warm_engine.misses == refused


class Forgetful(FakeEngine):
    """An engine whose identity leaves its context size out (as the llama.cpp engine's did), refusing a prompt whose
    tokens + ``max_tokens`` exceed its context (as the real engines do)."""

    def identity(self) -> dict:
        return {"type": "fake", "default": self.config.default}

    def generate(self, requests):
        limit = self.config.context_length
        out = super().generate(requests)
        for i, (req, res) in enumerate(zip(requests, out)):
            if res.ok and res.prompt_tokens + req.sampling.max_tokens > limit:
                out[i] = Result.over_context(req, ContextOverflow(res.prompt_tokens, limit, req.sampling.max_tokens))
        return out


def test_a_hit_that_does_not_fit_this_engines_context_is_over_context(tmp_path):
    """Questions take 4 prompt tokens, follow-ups 6, each asks for 4: with a context of 9 every question fits and
    every follow-up is over the context, also where the cache holds its answer from a larger context."""
    cache = RequestCache(tmp_path / "c.sqlite")
    big, small = FakeEngineConfig(context_length=60, default="yes"), FakeEngineConfig(context_length=9, default="yes")
    toy_run(CachedEngine(Forgetful(big), cache, "runs/a"))
    asking = CachedEngine(Forgetful(small), cache, "runs/b")
    warm, cold = toy_run(asking), toy_run(Forgetful(small))
    assert answers(warm) == answers(cold)
    over = [r for r in warm if r["status"] == "over_context"]
    assert sorted(r["failed_stage"] for r in over) == ["ask"] + ["follow"] * 5  # the long sample fails in ask
    assert asking.hits == 5  # the questions that fit still came from the cache (the long one is never cached)
