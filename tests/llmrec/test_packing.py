"""The KV packer (llmrec/packing.py): pure functions over token budgets, no engine named."""

from __future__ import annotations

import pytest

from llmrec.packing import GroupNeed, KVCapacity, group_need, pack_groups, pack_to


def test_group_need_counts_the_prefix_tree_once():
    base = list(range(1000))
    g = group_need("k", [base[:100], base[:500], base], [10, 10, 10], block_tokens=16)
    # 7 + (32 - 6) + (63 - 31) blocks: only the full blocks of a shorter prompt are shared (as in vLLM)
    assert g.unique_tokens == 65 * 16
    assert g.kv_tokens(16) == 1040 + 3 * 16
    assert g.prefill_saved() == 1600 - 1040
    disjoint = group_need("d", [[1] * 100, [2] * 100], [0, 0], block_tokens=16)
    assert disjoint.unique_tokens == 2 * 112 and disjoint.prefill_saved() == 0
    chars = group_need("c", ["a" * 400, "a" * 400 + "b" * 400], [0, 0], 16, tokens_per_unit=0.25)
    assert chars.prompt_tokens == (100, 200) and chars.unique_tokens == 224  # 7 blocks + (13 - 6 shared)
    exact = group_need("t", [base[:100], base[:150]], [0, 0])  # block of one token: the exact prefix tree
    assert exact.unique_tokens == 150 and exact.prefill_saved() == 100


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


def test_pack_to_a_capacity_uses_its_blocks_and_sequence_limit():
    groups = [GroupNeed(str(i), (100,), 100, (10,)) for i in range(6)]
    cap = KVCapacity(tokens=512, block_tokens=16, max_seqs=3, source="test")
    batches = pack_to(groups, cap)  # 100 prompt + one 16-token completion block = 116 each
    assert [b.sequences for b in batches] == [3, 3] and all(b.kv_tokens == 348 for b in batches)
    assert [b.sequences for b in pack_to(groups, KVCapacity(tokens=512))] == [4, 2]  # 110 each, token blocks
    with pytest.raises(ValueError, match="unknown"):
        pack_to(groups, KVCapacity())
