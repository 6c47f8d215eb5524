"""Engines declare their optional hooks by subclassing ``EngineBase``; one that does not conform is
refused when it is registered or imported by path, naming what is missing."""

from __future__ import annotations

import pytest

from llmrec.errors import ConfigError
from llmrec.registry import Registry
from llmrec.serving.engine import ENGINES, EngineBase, EngineConfig, EngineSpec, check_engine


class Headless:  # no base class, no generate
    def start(self): ...


class Odd(EngineBase):
    thread_safe = "yes"
    start = generate = count_tokens = identity = check_health = close = lambda self, *a: None


def test_registered_engines_conform_and_declare_their_hooks():
    for name in ENGINES.names():
        check_engine(ENGINES.get(name), name)
    assert ENGINES.get("openai").engine_cls.remote and not ENGINES.get("fake").engine_cls.remote
    assert ENGINES.get("vllm").engine_cls.serve_client is not None and ENGINES.get("fake").engine_cls.serve_client is None


def test_a_nonconforming_engine_is_refused_naming_what_is_missing():
    r = Registry("engine", check=check_engine)
    with pytest.raises(ConfigError) as e:
        r.register("headless", EngineSpec("headless", EngineConfig, Headless))
    msg = str(e.value)
    assert "not a subclass of llmrec.serving.engine.EngineBase" in msg
    assert "missing generate, count_tokens, identity, check_health, close" in msg
    with pytest.raises(ConfigError, match="thread_safe must be a bool"):
        r.register("odd", EngineSpec("odd", EngineConfig, Odd))


BAD_SPEC = EngineSpec("headless", EngineConfig, Headless)


def test_a_nonconforming_engine_by_path_fails_on_import():
    with pytest.raises(ConfigError, match="missing generate"):
        ENGINES.get("tests.serving.test_engine_protocol:BAD_SPEC")


def test_engine_configs_declare_label_and_placement_needs():
    """The runner reads an engine's label and placement needs from its config (no getattr): the base declares
    them with defaults, and each engine's config gives its own."""
    from llmrec import tracking
    from llmrec.pipelines.runner.placement import gpus_needed
    from llmrec.serving.engine import engine_config

    base = EngineConfig(type="x")
    assert (base.label, base.gpus_per_replica, base.gpu_share) == ("x", None, None)
    cases = {"fake": ({"model": "org/fake-7b"}, "fake-7b"),
             "openai": ({"model": "google/gemma-3-1b-it"}, "gemma-3-1b-it"),
             "llamacpp": ({"model_path": "/models/q4/gemma.gguf"}, "gemma.gguf"),
             "transformers": ({"model": "/ckpt/run-1/"}, "run-1"),
             "vllm": ({"model": "Qwen/Qwen3-8B", "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
                       "gpu_memory_utilization": 0.45}, "Qwen3-8B")}
    for kind, (fields, label) in cases.items():
        cfg = engine_config({"type": kind, **fields})
        assert cfg.label == label == tracking.model_label(cfg) == tracking.model_label({"type": kind, **fields})
    assert engine_config({"type": "llamacpp"}).label == "llamacpp"  # the embedded model: the engine type
    vllm = engine_config({"type": "vllm", **cases["vllm"][0]})
    assert gpus_needed(vllm) == 4 and vllm.gpu_share == 0.45
    assert gpus_needed(engine_config({"type": "fake"})) is None and gpus_needed(None) is None
