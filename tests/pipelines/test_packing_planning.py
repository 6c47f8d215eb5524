"""KV packer and planner: pure functions on model configs written here (no engine, no GPU)."""

from __future__ import annotations

import pytest

from llmrec.pipelines.runner.packing import GroupNeed, group_need, pack_groups
from llmrec.pipelines.runner.planning import ModelShape, replica_budget

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


def test_group_need_counts_the_prefix_tree_once():
    base = list(range(1000))
    g = group_need("k", [base[:100], base[:500], base], [10, 10, 10], block_size=16)
    # 7 + (32 - 6) + (63 - 31) blocks: only the full blocks of a shorter prompt are shared (as in vLLM)
    assert g.unique_tokens == 65 * 16
    assert g.kv_tokens(16) == 1040 + 3 * 16
    assert g.prefill_saved() == 1600 - 1040
    disjoint = group_need("d", [[1] * 100, [2] * 100], [0, 0], block_size=16)
    assert disjoint.unique_tokens == 2 * 112 and disjoint.prefill_saved() == 0
    chars = group_need("c", ["a" * 400, "a" * 400 + "b" * 400], [0, 0], 16, tokens_per_unit=0.25)
    assert chars.prompt_tokens == (100, 200) and chars.unique_tokens == 224  # 7 blocks + (13 - 6 shared)


def _need(key: str, tokens: int, n: int = 1) -> GroupNeed:
    return GroupNeed(key, (tokens,) * n, tokens * n, (0,) * n)


def test_packer_fits_the_budget_longest_first_and_never_splits():
    groups = [_need("a", 100_000), _need("b", 300_000), _need("c", 150_000), _need("d", 50_000),
              _need("e", 60_000, n=2)]
    batches = pack_groups(groups, budget_tokens=400_000)
    assert [g.key for g in batches[0].groups][0] == "b"  # longest first
    assert all(b.kv_tokens <= 400_000 for b in batches)
    keys = [g.key for b in batches for g in b.groups]
    assert sorted(keys) == ["a", "b", "c", "d", "e"]  # every group once, whole
    assert len(batches) == 2


def test_packer_flags_a_group_larger_than_the_budget_and_limits_sequences():
    batches = pack_groups([_need("huge", 500_000), _need("x", 10)], budget_tokens=400_000)
    assert batches[0].oversize and [g.key for g in batches[0].groups] == ["huge"]
    assert not batches[1].oversize
    many = pack_groups([_need(str(i), 10) for i in range(10)], budget_tokens=10_000, max_seqs=4)
    assert [b.sequences for b in many] == [4, 4, 2]
    with pytest.raises(ValueError, match="positive"):
        pack_groups([], 0)


def test_plan_cli_prints_a_fitting_plan_without_an_engine(tmp_path):
    import json

    import typer
    from typer.testing import CliRunner

    from llmrec.cli import EXTRA_VERBS
    from llmrec.pipelines.runner import plan_cli
    from tests.conftest import require_data

    assert "llmrec.pipelines.runner.plan_cli" in EXTRA_VERBS
    app = typer.Typer()
    app.callback()(lambda: None)  # a group, so that "plan" is a sub-command as under `llmrec`
    plan_cli.register(app)

    data = require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(json.dumps({
        "benchmark": {"name": "prefeval", "task": "mcq", "topics": ["travel_restaurant"], "forms": ["explicit"],
                      "turns": [2, 10], "methods": ["zero-shot"], "per_topic": 2},
        "engine": {"type": "vllm", "model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 131072,
                   "model_config_path": str(tmp_path / "config.json")},
        "data": {"dir": str(data)}, "execution": {"num_gpus_per_worker": 1}}))
    out = CliRunner().invoke(app, ["plan", str(cfg)])
    assert out.exit_code == 0, out.output
    assert "KV bytes per token: 131,072" in out.output
    assert "sequences that fit per replica at 131,072 tokens: 3" in out.output
    assert "prefix groups planned: 2 of 2" in out.output and "every batch fits" in out.output
    assert "saved" in out.output
    bad = CliRunner().invoke(app, ["plan", str(cfg), "--set", "engine={type: fake}"])
    assert bad.exit_code != 0


def test_runner_rows_follow_the_kv_budget_and_keep_groups_whole():
    from llmrec.pipelines.registry import benchmark_config, get_benchmark
    from llmrec.pipelines.runner.prompt_sizes import packed_rows
    from llmrec.pipelines.runner.worker import group_by_prefix
    from tests.conftest import require_data

    data = require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
    bench = get_benchmark("prefeval")
    cfg = benchmark_config({"name": "prefeval", "task": "mcq", "topics": ["travel_restaurant"], "forms": ["explicit"],
                            "turns": [2, 10], "methods": ["zero-shot", "reminder"], "per_topic": 3})
    groups = group_by_prefix(bench.build_samples(cfg, data))
    assert len(groups) == 3 and all("_layout" in s for g in groups for s in g)
    one = packed_rows(bench, cfg, groups, budget_tokens=10_000_000)
    assert len(one) == 1 and len(one[0]) == sum(map(len, groups))
    tight = packed_rows(bench, cfg, groups, budget_tokens=1)  # every group alone (oversize), none split
    assert sorted(len(r) for r in tight) == sorted(len(g) for g in groups)
    assert all(len({s["prefix_key"] for s in r}) == 1 for r in tight)
    assert all("outputs" not in s for g in groups for s in g)  # the dry run worked on copies
