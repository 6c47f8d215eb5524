"""Pack prefix groups into batches whose concurrent KV-cache need fits one replica's budget.

Why: a batch's requests run concurrently on one engine. When their KV need exceeds the
engine's cache, the engine preempts sequences and evicts cached blocks — first the shared
prefixes that grouping was meant to reuse. Packing by KV need (not by a fixed count of groups)
lets a 100k-token sweep run without preemption.

KV need of a group (with prefix caching, members share every full block of a common prefix,
so the cache holds the prefix *tree* of their prompts): the distinct prompt blocks of the group
(sorted prompts: Σ blocks(p_i) − full blocks shared with the previous one) plus each member's
completion blocks, in tokens. PrefEval's turn variants of one pair are prefixes of each other,
so a group of 30 prompts up to 100k tokens needs ~100k tokens of KV, not 30 × 100k.
First-fit decreasing: groups longest first; each goes into the first batch with room; a group
is never split. A group larger than the whole budget is a batch of its own, flagged
``oversize`` (the engine will then run its members partly in sequence). With R replicas the
groups are then dealt over a multiple of R batches balanced by KV need (``spread_over``), so no
replica idles while another runs more than its share.

Dynamic dispatch (``dispatch_slices``): a run does not hand each replica fixed batches. It cuts the
groups into KV-sized slices (whole groups, each slice within the budget, an oversize group alone),
at least ``waves`` per replica as far as there are groups, and queues them largest first; a replica
runs one slice at a time and pulls the next when it finishes, i.e. when its KV cache frees. So a
replica that runs slower (longer answers, a loaded host) takes fewer slices and none idles while
work is queued. ``expected_dispatch`` replays that pull with each slice's KV need as its duration
(``llmrec plan``).

Engine-neutral: an engine states its budget as a ``KVCapacity`` (serving/engine.py's optional
``kv_capacity`` hook); this module holds pure functions (no engine, no Ray).
"""

from __future__ import annotations

import os.path
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KVCapacity:
    """One replica's KV cache as the packer needs it: the ``tokens`` it holds (None: unknown),
    the ``block_tokens`` it allocates in (1: token by token), the ``max_seqs`` it runs at once
    (None: no limit) and where the figures come from (``source``, for reports)."""

    tokens: int | None = None
    block_tokens: int = 1
    max_seqs: int | None = None
    source: str = "not stated by the engine"


@dataclass(frozen=True)
class GroupNeed:
    """One prefix group: its members' prompt tokens, the distinct prompt tokens of their prefix
    tree (block-rounded) and their completion budgets."""

    key: str
    prompt_tokens: tuple[int, ...]
    unique_tokens: int
    max_tokens: tuple[int, ...]

    def kv_tokens(self, block_tokens: int = 1) -> int:
        return self.unique_tokens + sum(_blocks(m, block_tokens) for m in self.max_tokens) * block_tokens

    def prefill_saved(self) -> int:
        """Prompt tokens not prefilled thanks to prefix sharing (vs each prompt alone)."""
        return max(0, sum(self.prompt_tokens) - self.unique_tokens)


def group_need(key: str, prompts: list, max_tokens: list[int], block_tokens: int = 1,
               tokens_per_unit: float = 1.0) -> GroupNeed:
    """A group's need from its prompts as token lists (or strings with ``tokens_per_unit``, e.g. 1/4
    token per character when no tokenizer is at hand)."""
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    unique, prev = 0, None
    for i in order:
        n = int(len(prompts[i]) * tokens_per_unit)
        shared = int(_common(prompts[i], prev) * tokens_per_unit) // block_tokens if prev is not None else 0
        unique += (_blocks(n, block_tokens) - shared) * block_tokens
        prev = prompts[i]
    lengths = tuple(int(len(p) * tokens_per_unit) for p in prompts)
    return GroupNeed(key, lengths, unique, tuple(max_tokens))


@dataclass
class Batch:
    groups: list[GroupNeed] = field(default_factory=list)
    kv_tokens: int = 0
    oversize: bool = False

    @property
    def sequences(self) -> int:
        return sum(len(g.prompt_tokens) for g in self.groups)


def _blocks(tokens: int, block_tokens: int) -> int:
    return -(-max(0, tokens) // block_tokens)


def pack_groups(groups: list[GroupNeed], budget_tokens: int, block_tokens: int = 1,
                max_seqs: int | None = None) -> list[Batch]:
    """Batches (largest need first) whose KV need ≤ ``budget_tokens`` and sequences ≤ ``max_seqs``."""
    if budget_tokens <= 0:
        raise ValueError(f"the KV budget must be positive, got {budget_tokens} tokens")
    batches: list[Batch] = []
    for g in sorted(groups, key=lambda g: -g.kv_tokens(block_tokens)):
        need, n = g.kv_tokens(block_tokens), len(g.prompt_tokens)
        if need > budget_tokens or (max_seqs is not None and n > max_seqs):
            batches.append(Batch([g], need, oversize=True))
            continue
        for b in batches:
            if (not b.oversize and b.kv_tokens + need <= budget_tokens
                    and (max_seqs is None or b.sequences + n <= max_seqs)):
                b.groups.append(g)
                b.kv_tokens += need
                break
        else:
            batches.append(Batch([g], need))
    return batches


def spread_over(batches: list[Batch], replicas: int, budget_tokens: int, block_tokens: int = 1,
                max_seqs: int | None = None) -> list[Batch]:
    """The same groups in a multiple of ``replicas`` batches (as far as there are groups), balanced
    by KV need, so that no replica idles while another runs more than its share (first-fit fills a
    batch before it opens the next: four groups fit two batches as 3 + 1). The groups are dealt
    largest first, each to the batch with the least need so far, into the least such number of
    batches in which every batch of several groups fits the budget; else the batches stay as packed."""
    if replicas <= 1:
        return batches
    groups = [g for b in batches for g in b.groups]
    for k in range(min(-(-len(batches) // replicas) * replicas, len(groups)), len(groups) + 1, replicas):
        dealt = [Batch() for _ in range(k)]
        for g in sorted(groups, key=lambda g: -g.kv_tokens(block_tokens)):
            b = min(dealt, key=lambda b: b.kv_tokens)
            b.groups.append(g)
            b.kv_tokens += g.kv_tokens(block_tokens)
        for b in dealt:
            b.oversize = b.kv_tokens > budget_tokens or (max_seqs is not None and b.sequences > max_seqs)
        if not any(b.oversize and len(b.groups) > 1 for b in dealt):
            return sorted(dealt, key=lambda b: -b.kv_tokens)
    return batches


def pack_to(groups: list[GroupNeed], capacity: KVCapacity, replicas: int = 1) -> list[Batch]:
    """``pack_groups`` within a replica's capacity (its ``tokens`` must be known), spread over
    ``replicas`` (``spread_over``)."""
    if capacity.tokens is None:
        raise ValueError("the KV capacity is unknown: give a token budget")
    batches = pack_groups(groups, capacity.tokens, capacity.block_tokens, capacity.max_seqs)
    return spread_over(batches, replicas, capacity.tokens, capacity.block_tokens, capacity.max_seqs)


def _common(a, b) -> int:
    """Length of the common prefix of two token lists (or strings)."""
    return len(os.path.commonprefix([a, b]))


def dispatch_slices(groups: list[GroupNeed], capacity: KVCapacity, replicas: int = 1, waves: int = 2) -> list[Batch]:
    """The slices that replicas pull, in pull order (largest KV need first, so that the longest work starts first
    and the small slices even out the end). Each slice holds whole groups within the capacity (tokens and
    sequences); a group over it is a slice alone (``oversize``). The other groups are dealt largest first, each to
    the slice with the least need so far, into the least number of slices that is at least first-fit's count and,
    with several replicas, ``waves`` × ``replicas`` (as far as there are groups) in which every slice fits."""
    if capacity.tokens is None:
        raise ValueError("the KV capacity is unknown: give a token budget")
    budget, block, seqs = capacity.tokens, capacity.block_tokens, capacity.max_seqs
    packed = pack_groups(groups, budget, block, seqs)
    alone = [b for b in packed if b.oversize]
    rest = [g for b in packed if not b.oversize for g in b.groups]
    need = {id(g): g.kv_tokens(block) for g in rest}
    slices: list[Batch] = []
    least = waves * replicas if replicas > 1 else 1  # one replica: nobody to even out with, so no smaller slices
    for k in range(min(max(len(packed) - len(alone), least - len(alone), 1), len(rest)), len(rest) + 1):
        dealt = [Batch() for _ in range(k)]
        for g in sorted(rest, key=lambda g: -need[id(g)]):
            b = min(dealt, key=lambda b: b.kv_tokens)
            b.groups.append(g)
            b.kv_tokens += need[id(g)]
        if all(b.kv_tokens <= budget and (seqs is None or b.sequences <= seqs) for b in dealt):
            slices = dealt
            break
    else:
        slices = [b for b in packed if not b.oversize]  # unreachable: k = len(rest) is one group a slice
    return sorted(alone + slices, key=lambda b: -b.kv_tokens)


@dataclass
class Replica:
    """One replica in ``expected_dispatch``: the slices (indices into the pull order) it is expected to run."""

    slices: list[int] = field(default_factory=list)
    groups: int = 0
    kv_tokens: int = 0  # summed over its slices: the work it is expected to get


def expected_dispatch(slices: list[Batch], replicas: int) -> list[Replica]:
    """Which replica pulls which slice when every replica takes the next slice as it finishes its last one,
    taking a slice's KV need as its duration (the first free replica, the lowest index on a tie)."""
    out = [Replica() for _ in range(max(1, replicas))]
    for i, b in enumerate(slices):
        r = min(out, key=lambda r: r.kv_tokens)
        r.slices.append(i)
        r.groups += len(b.groups)
        r.kv_tokens += b.kv_tokens
    return out
