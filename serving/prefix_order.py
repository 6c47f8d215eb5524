"""Which requests of a batch should wait for another one's prefill.

vLLM's prefix cache only serves blocks that are already computed: requests sharing a long
prompt prefix that are scheduled in the same step each compute it again. Engines that submit a
batch concurrently therefore start one request per shared prefix first (the leader) and the
others once the leader's prompt is in the cache (its first output token). The runner already
sends each prefix group back to back, longest first, so the leader is the group's first request.
"""

from __future__ import annotations


def leaders(token_ids: list[list[int]], min_shared: int) -> list[int | None]:
    """For each request, the index of the earlier request whose prefill it should wait for
    (same first ``min_shared`` tokens), or None: it starts at once. ``min_shared <= 0``: none wait."""
    out: list[int | None] = []
    first: dict[tuple[int, ...], int] = {}
    for i, ids in enumerate(token_ids):
        if min_shared <= 0 or len(ids) < min_shared:
            out.append(None)
            continue
        key = tuple(ids[:min_shared])
        out.append(first.get(key))
        first.setdefault(key, i)
    return out
