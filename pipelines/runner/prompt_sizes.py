"""Prompt sizes of prefix groups before any engine runs: a dry run of the benchmark's stages.

``process_samples`` runs on copies of the samples against a recording engine that answers each
request with ``max_tokens`` placeholder words (a choice constraint with its first choice), so
later stages see realistic lengths. Each sample's longest subject prompt is kept (the stage
whose KV need peaks) and counted once. Tokens are counted with the subject engine's ``prompt_tokenizer`` (the
model's own tokenizer and prompt format, when installed here; nothing is downloaded), else
estimated at 4 characters per token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable

from llmrec.packing import GroupNeed, KVCapacity, dispatch_slices, group_need
from llmrec.pipelines.runner.worker import process_samples
from llmrec.types import Request, Result

TOKENS_PER_CHAR = 0.25
DISPATCH_WAVES = 2  # slices per replica, at least (as far as there are groups): see dispatch_slices
Tokenize = Callable[[Request], list[int]]


@dataclass(frozen=True)
class TokenCount:
    """How prompt tokens are counted: ``tokenize`` (the model's tokenizer) or 4 characters per token."""

    tokenize: Tokenize | None = None

    def units(self, request: Request) -> list[int] | str:
        """The prompt as token ids, or as text when there is no tokenizer."""
        return self.tokenize(request) if self.tokenize is not None else _text(request)

    def units_many(self, requests: list[Request]) -> list[list[int] | str]:
        """``units`` of each request; in one call when the tokenizer has ``many`` (a list at once)."""
        many = getattr(self.tokenize, "many", None)
        return list(many(requests)) if callable(many) else [self.units(r) for r in requests]

    @property
    def per_unit(self) -> float:
        return 1.0 if self.tokenize is not None else TOKENS_PER_CHAR

    def describe(self) -> str:
        return "the model's tokenizer" if self.tokenize is not None else "4 chars/token: no tokenizer installed"


def _text(request: Request) -> str:
    return "".join(f"<{m.role}>{m.content}" for m in request.messages)


class RecordingEngine:
    """Answers with placeholders; keeps each sample's longest subject request (by characters) to be
    counted once at the end (tokenizing every request of a 100k-token dry run would cost minutes)."""

    thread_safe = True

    def __init__(self, role: str):
        self.role, self.peak = role, {}

    def generate(self, requests: list[Request]) -> list[Result]:
        out = []
        for r in requests:
            chars = len(_text(r))
            sid = (r.request_id or "").split(":")[0]
            if self.role == "subject" and chars > self.peak.get(sid, (0, None))[0]:
                self.peak[sid] = (chars, r)
            c = r.constraint
            answer = c.choices[0] if c is not None and c.choices else " ".join(["word"] * r.sampling.max_tokens)
            out.append(Result(text=answer, prompt_tokens=int(chars * TOKENS_PER_CHAR),
                              completion_tokens=r.sampling.max_tokens, request_id=r.request_id))
        return out


def dry_run_needs(bench, bench_cfg, groups: list[list[dict]], block_tokens: int = 1, assets: dict | None = None,
                  count: TokenCount = TokenCount()) -> list[GroupNeed]:
    """One ``GroupNeed`` per group (key = the group's index), the samples left untouched.
    ``assets``: the benchmark's shared data, as the workers get it."""
    peaks = []
    for g in groups:
        engines = {"subject": RecordingEngine("subject"), "judge": RecordingEngine("judge")}
        process_samples(bench, bench_cfg, json.loads(json.dumps(g)), engines.__getitem__, retries=0, backoff_s=0,
                        assets=assets)
        peaks.append([r for _, r in engines["subject"].peak.values()])
    units = iter(count.units_many([r for group in peaks for r in group]))  # every group's prompts in one call
    return [group_need(str(i), [next(units) for _ in group] or [""], [r.sampling.max_tokens for r in group] or [0],
                       block_tokens, count.per_unit) for i, group in enumerate(peaks)]


def packed_rows(bench, bench_cfg, groups: list[list[dict]], capacity: KVCapacity, assets: dict | None = None,
                count: TokenCount = TokenCount(), replicas: int = 1, waves: int = DISPATCH_WAVES) -> list[list[dict]]:
    """Groups regrouped into the KV-sized slices that replicas pull (``llmrec.packing.dispatch_slices``): one list
    of samples per slice, groups kept whole, in pull order (largest first; at least ``waves`` slices per replica
    when there are enough groups). One such list is one Ray Data row in a block of its own, so it reaches one
    replica, and a replica that finishes its slice takes the next queued one."""
    needs = dry_run_needs(bench, bench_cfg, groups, capacity.block_tokens, assets, count)
    return [[s for need in b.groups for s in groups[int(need.key)]]
            for b in dispatch_slices(needs, capacity, replicas, waves)]


def run_capacity(engine, ex) -> KVCapacity:
    """The subject engine's KV capacity for a run: its tokens replaced by ``execution.kv_budget_tokens`` when set."""
    cap = engine.kv_capacity()
    return replace(cap, tokens=ex.kv_budget_tokens, source="execution.kv_budget_tokens") if ex.kv_budget_tokens else cap


def over_capacity(budget: int | None, started: KVCapacity) -> str | None:
    """Why rows packed to ``budget`` may not fit a started engine's measured capacity, or None."""
    if budget is None or started.tokens is None or budget <= started.tokens:
        return None
    return (f"execution.kv_budget_tokens ({budget:,}) is more than the {started.tokens:,} KV tokens it holds "
            f"({started.source}): packed batches may be preempted; set the budget to at most that")
