"""Pack prefix groups into batches whose concurrent KV-cache need fits one replica's budget.

Why: a batch's requests run concurrently on one engine. When their KV need exceeds the
cache (blocks × block size), vLLM preempts sequences and evicts cached blocks — first the
shared prefixes that grouping was meant to reuse. Packing by KV need (not by a fixed count of
groups) lets a 100k-token sweep run without preemption.

KV need of a group (with prefix caching, members share every full block of a common prefix,
so the cache holds the prefix *tree* of their prompts): the distinct prompt blocks of the group
(sorted prompts: Σ blocks(p_i) − full blocks shared with the previous one) plus each member's
completion blocks, in tokens. PrefEval's turn variants of one pair are prefixes of each other,
so a group of 30 prompts up to 100k tokens needs ~100k tokens of KV, not 30 × 100k.
First-fit decreasing: groups longest first; each goes into the first batch with room; a group
is never split. A group larger than the whole budget is a batch of its own, flagged
``oversize`` (vLLM will then run its members partly in sequence).
Pure functions: no engine, no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupNeed:
    """One prefix group: its members' prompt tokens, the distinct prompt tokens of their prefix
    tree (block-rounded) and their completion budgets."""

    key: str
    prompt_tokens: tuple[int, ...]
    unique_tokens: int
    max_tokens: tuple[int, ...]

    def kv_tokens(self, block_size: int = 16) -> int:
        return self.unique_tokens + sum(_blocks(m, block_size) for m in self.max_tokens) * block_size

    def prefill_saved(self) -> int:
        """Prompt tokens not prefilled thanks to prefix sharing (vs each prompt alone)."""
        return max(0, sum(self.prompt_tokens) - self.unique_tokens)


def group_need(key: str, prompts: list, max_tokens: list[int], block_size: int = 16,
               tokens_per_unit: float = 1.0) -> GroupNeed:
    """A group's need from its prompts as token lists (or strings with ``tokens_per_unit``, e.g. 1/4
    token per character when no tokenizer is at hand)."""
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    unique, prev = 0, None
    for i in order:
        n = int(len(prompts[i]) * tokens_per_unit)
        shared = int(_common(prompts[i], prev) * tokens_per_unit) // block_size if prev is not None else 0
        unique += (_blocks(n, block_size) - shared) * block_size
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


def _blocks(tokens: int, block_size: int) -> int:
    return -(-max(0, tokens) // block_size)


def pack_groups(groups: list[GroupNeed], budget_tokens: int, block_size: int = 16,
                max_seqs: int | None = None, max_groups: int | None = None) -> list[Batch]:
    """Batches (largest need first) whose KV need ≤ ``budget_tokens`` and sequences ≤ ``max_seqs``."""
    if budget_tokens <= 0:
        raise ValueError(f"the KV budget must be positive, got {budget_tokens} tokens")
    batches: list[Batch] = []
    for g in sorted(groups, key=lambda g: -g.kv_tokens(block_size)):
        need, n = g.kv_tokens(block_size), len(g.prompt_tokens)
        if need > budget_tokens or (max_seqs is not None and n > max_seqs):
            batches.append(Batch([g], need, oversize=True))
            continue
        for b in batches:
            if (not b.oversize and b.kv_tokens + need <= budget_tokens
                    and (max_seqs is None or b.sequences + n <= max_seqs)
                    and (max_groups is None or len(b.groups) < max_groups)):
                b.groups.append(g)
                b.kv_tokens += need
                break
        else:
            batches.append(Batch([g], need))
    return batches


def _common(a, b) -> int:
    """Length of the common prefix of two token lists (or strings)."""
    n = min(len(a), len(b))
    if isinstance(a, str):
        import os.path

        return len(os.path.commonprefix([a, b]))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
