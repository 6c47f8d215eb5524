"""The KV packer (llmrec/packing.py): pure functions over token budgets, no engine named."""

from __future__ import annotations

import pytest

from llmrec.packing import (GroupNeed, KVCapacity, dispatch_slices, expected_dispatch, group_need, pack_groups,
                            pack_to, spread_over)


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


def _keys(batches) -> list[list[str]]:
    return [sorted(g.key for g in b.groups) for b in batches]


def test_groups_spread_over_the_replicas_balanced_by_kv_need():
    # first-fit packs 100k+90k+80k into one batch of the 300k budget and 70k alone: 3 + 1 groups, one replica idles
    groups = [_need("a", 100_000), _need("b", 90_000), _need("c", 80_000), _need("d", 70_000)]
    cap = KVCapacity(tokens=300_000)
    assert _keys(pack_to(groups, cap)) == [["a", "b", "c"], ["d"]]
    two = pack_to(groups, cap, replicas=2)
    assert _keys(two) == [["a", "d"], ["b", "c"]] and [b.kv_tokens for b in two] == [170_000, 170_000]
    assert not any(b.oversize for b in two)
    # fewer groups than replicas: one batch per group rather than one batch for all
    assert _keys(pack_to(groups[:2], cap, replicas=4)) == [["a"], ["b"]]


def test_spreading_keeps_a_multiple_of_the_replicas_within_the_budget():
    # three packed batches (60+40, 60, 60) over two replicas: four batches, so each replica runs two
    groups = [_need("a", 60), _need("b", 60), _need("c", 60), _need("d", 40)]
    packed = pack_groups(groups, budget_tokens=100)
    assert [b.kv_tokens for b in packed] == [100, 60, 60]
    spread = spread_over(packed, replicas=2, budget_tokens=100)
    assert _keys(spread) == [["a"], ["b"], ["c"], ["d"]]
    # a group larger than the budget stays alone (flagged); the small ones go to the other replica
    huge = pack_to([_need("huge", 500), _need("x", 10), _need("y", 10)], KVCapacity(tokens=400), replicas=2)
    assert _keys(huge) == [["huge"], ["x", "y"]] and [b.oversize for b in huge] == [True, False]
    # the sequence limit holds in the dealt batches too: 3 + 3 sequences at most 4 a batch cannot be 2 batches
    seqs = [_need("p", 10, n=3), _need("q", 10, n=3), _need("r", 10, n=1)]
    limited = pack_to(seqs, KVCapacity(tokens=1_000, max_seqs=4), replicas=2)
    assert all(b.sequences <= 4 for b in limited) and sorted(k for b in _keys(limited) for k in b) == ["p", "q", "r"]



def test_dispatch_cuts_kv_sized_slices_pulled_largest_first():
    # six equal groups, three fit the budget: not 3 + 3 fixed batches but four slices (two waves of two replicas)
    groups = [_need(k, 19_000, n=5) for k in "abcdef"]
    cap = KVCapacity(tokens=4 * 19_000 * 5)
    slices = dispatch_slices(groups, KVCapacity(tokens=60_000 * 5), replicas=2)
    assert [len(b.groups) for b in slices] == [2, 2, 1, 1] and all(b.kv_tokens <= 60_000 * 5 for b in slices)
    assert sorted(g.key for b in slices for g in b.groups) == list("abcdef")  # every group once, none split
    assert len(dispatch_slices(groups, cap, replicas=2, waves=1)) == 2  # first-fit's count when it is more
    # one replica has nobody to even out with: first-fit's full slices
    assert [len(b.groups) for b in dispatch_slices(groups, KVCapacity(tokens=60_000 * 5), replicas=1)] == [3, 3]
    # first-fit fits 50+50 and 34+33+33 in two slices; dealt largest first into two, the last 33 would not fit:
    # three slices
    odd = [_need("a", 50), _need("b", 50), _need("c", 34), _need("d", 33), _need("e", 33)]
    assert len(pack_groups(odd, 100)) == 2
    assert _keys(dispatch_slices(odd, KVCapacity(tokens=100), replicas=1, waves=1)) == [["a", "e"], ["c", "d"], ["b"]]
    # an oversize group is a slice alone and first in the queue; the others never join it
    huge = dispatch_slices([_need("x", 10), _need("huge", 500), _need("y", 10)], KVCapacity(tokens=400), 2, waves=1)
    assert _keys(huge) == [["huge"], ["x", "y"]] and [b.oversize for b in huge] == [True, False]
    # the sequence limit holds in every slice
    seqs = [_need("p", 10, n=3), _need("q", 10, n=3), _need("r", 10, n=1)]
    assert all(b.sequences <= 4 for b in dispatch_slices(seqs, KVCapacity(tokens=1_000, max_seqs=4), 1, waves=1))
    assert dispatch_slices([], cap, replicas=2) == []
    with pytest.raises(ValueError, match="unknown"):
        dispatch_slices(groups, KVCapacity(), 2)


def test_the_expected_dispatch_gives_the_next_slice_to_the_first_free_replica():
    slices = dispatch_slices([_need("long", 300), _need("a", 100), _need("b", 100), _need("c", 100)],
                             KVCapacity(tokens=300), replicas=2)
    assert [b.kv_tokens for b in slices] == [300, 100, 100, 100]
    first, second = expected_dispatch(slices, replicas=2)
    # a fixed split would give each replica two groups (400 + 200); pulled, the long slice's replica takes no more
    assert (first.slices, first.kv_tokens) == ([0], 300) and (second.slices, second.kv_tokens) == ([1, 2, 3], 300)
    assert [r.slices for r in expected_dispatch(slices, replicas=5)][-1] == []
