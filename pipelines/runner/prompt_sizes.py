"""Prompt sizes of prefix groups before any engine runs: a dry run of the benchmark's stages.

``process_samples`` runs on copies of the samples against a recording engine that answers each
request with ``max_tokens`` placeholder words (a choice constraint with its first choice), so
later stages see realistic lengths. Each sample's longest subject prompt is kept (the stage
whose KV need peaks). Tokens are estimated at 4 characters per token: no tokenizer download.
"""

from __future__ import annotations

import json

from llmrec.pipelines.runner.packing import GroupNeed, group_need
from llmrec.pipelines.runner.worker import process_samples
from llmrec.types import Request, Result

TOKENS_PER_CHAR = 0.25


class RecordingEngine:
    """Answers with placeholders; keeps each sample's longest subject prompt (text, max_tokens)."""

    thread_safe = True

    def __init__(self, role: str):
        self.role, self.peak = role, {}

    def generate(self, requests: list[Request]) -> list[Result]:
        out = []
        for r in requests:
            text = "".join(f"<{m.role}>{m.content}" for m in r.messages)
            sid = (r.request_id or "").split(":")[0]
            if self.role == "subject" and len(text) > len(self.peak.get(sid, ("",))[0]):
                self.peak[sid] = (text, r.sampling.max_tokens)
            c = r.constraint
            answer = c.choices[0] if c is not None and c.choices else " ".join(["word"] * r.sampling.max_tokens)
            out.append(Result(text=answer, prompt_tokens=int(len(text) * TOKENS_PER_CHAR),
                              completion_tokens=r.sampling.max_tokens, request_id=r.request_id))
        return out


def dry_run_needs(bench, bench_cfg, groups: list[list[dict]], block_size: int = 16,
                  assets: dict | None = None) -> list[GroupNeed]:
    """One ``GroupNeed`` per group (key = the group's index), the samples left untouched.
    ``assets``: the benchmark's shared data, as the workers get it."""
    needs = []
    for i, g in enumerate(groups):
        engines = {"subject": RecordingEngine("subject"), "judge": RecordingEngine("judge")}
        process_samples(bench, bench_cfg, json.loads(json.dumps(g)), engines.__getitem__, retries=0, backoff_s=0,
                        assets=assets)
        peaks = list(engines["subject"].peak.values()) or [("", 0)]
        needs.append(group_need(str(i), [t for t, _ in peaks], [m for _, m in peaks], block_size, TOKENS_PER_CHAR))
    return needs


def packed_rows(bench, bench_cfg, groups: list[list[dict]], budget_tokens: int, block_size: int = 16,
                max_seqs: int | None = None, assets: dict | None = None) -> list[list[dict]]:
    """Groups regrouped into KV-packed batches: one list of samples per batch (groups kept whole,
    in order, longest batch first). One such list is one Ray Data row, so it reaches one replica."""
    from llmrec.pipelines.runner.packing import pack_groups

    needs = dry_run_needs(bench, bench_cfg, groups, block_size, assets)
    batches = pack_groups(needs, budget_tokens, block_size, max_seqs)
    return [[s for need in b.groups for s in groups[int(need.key)]] for b in batches]
