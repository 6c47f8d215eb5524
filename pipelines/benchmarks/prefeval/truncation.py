"""``truncation: drop_oldest`` — the shrink hook of the subject stages.

When a request is over the engine's context, drop the oldest inter-turn pairs (never the
preference, the statements or the question) and render again. The number dropped per step is
estimated from the engine's token count and its limit (the result's typed ``context_limit``),
so a 298-pair conversation fits in a few steps; when the limit is unknown, a tenth of the
remaining pairs goes per step. The count is kept on the sample as ``dropped_pairs`` so the
later self-critic stages start from the same conversation.
"""

from __future__ import annotations

import logging
from typing import Callable

from llmrec.pipelines.benchmarks.prefeval import conversation as conv
from llmrec.types import Request, Result

log = logging.getLogger(__name__)


def pairs_to_drop(pair_chars: list[int], request: Request, result: Result) -> int:
    """Fewest oldest pairs whose estimated tokens cover the excess (at least one)."""
    if result.context_limit is None or not result.prompt_tokens:
        return max(1, len(pair_chars) // 10)
    excess = result.prompt_tokens + request.sampling.max_tokens - result.context_limit
    chars = sum(len(msg.content) for msg in request.messages) or 1
    per_char = result.prompt_tokens / chars
    covered, n = 0.0, 0
    while n < len(pair_chars) and covered < excess:
        covered += pair_chars[n] * per_char
        n += 1
    return max(1, n)


def drop_oldest(render: Callable[[dict], Request | None]) -> Callable[[dict, Request, Result], Request | None]:
    """A shrink hook for a stage rendered by ``render``."""

    def shrink(sample: dict, request: Request, result: Result) -> Request | None:
        remaining = conv.inter_pair_chars(sample)
        if not remaining:
            return None
        n = pairs_to_drop(remaining, request, result)
        sample["dropped_pairs"] = int(sample.get("dropped_pairs") or 0) + n
        return render(sample)

    return shrink
