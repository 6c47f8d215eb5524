"""Prefix affinity for a ``ray.serve.llm`` app with several replicas: a Serve request router.

vLLM's prefix cache lives in one replica. Requests of one prefix group served by two replicas
compute the shared prefix twice, so the group's followers must reach the replica that computed
it. ray.serve.llm's own ``PrefixCacheAffinityRouter`` (Ray 2.60) matches the prompt's *text*
and divides by its length: a token-id prompt (what ``VLLMServeClient`` sends) has none, and the
router raises ZeroDivisionError. This router keys a request instead:

- by its OpenAI ``user`` field, which ``VLLMServeClient`` sets to the request's ``prefix_key``
  (OpenAI's own prompt-cache key, ``prompt_cache_key``, took over this use of ``user``; vLLM's
  completions API has only ``user``);
- else by the prompt's first ``prefix_tokens`` token ids (4 x as many characters of a text prompt);
- a request with neither (e.g. chat messages) is routed by load alone.

A key seen before goes to the replica that served it (Serve falls back to the others only when
that one is full or gone); a new key goes to the replica with the fewest requests in flight from
this router, ties broken by fewest keys held. The table lives in the process that routes (the
app's ingress, one replica unless it autoscales; each ingress replica keeps its own table).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable, Sequence

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

MAX_KEYS = 10_000  # prefix keys remembered (least recently routed forgotten first)


class AffinityTable:
    """Which replica holds which prefix key, and the load that places new keys (no Ray here)."""

    def __init__(self, max_keys: int = MAX_KEYS):
        self.owner: OrderedDict[Hashable, Hashable] = OrderedDict()
        self.in_flight: Counter = Counter()
        self._max_keys = max_keys

    def rank(self, key: Hashable | None, replicas: Sequence[Hashable]) -> list[list[Hashable]]:
        """Replicas in order of preference: the key's owner first, else the least loaded (which
        then owns the key at once, so that the next new key, routed before this one lands, goes elsewhere)."""
        if not replicas:
            return []
        owner = self.owner.get(key) if key is not None else None
        if owner not in replicas:
            held = Counter(self.owner.values())
            owner = min(replicas, key=lambda r: (self.in_flight[r], held[r], str(r)))
            self._own(key, owner)
        return [[owner], [r for r in replicas if r != owner]]

    def routed(self, key: Hashable | None, replica: Hashable) -> None:
        self.in_flight[replica] += 1
        self._own(key, replica)

    def _own(self, key: Hashable | None, replica: Hashable) -> None:
        if key is None:
            return
        self.owner[key] = replica
        self.owner.move_to_end(key)
        while len(self.owner) > self._max_keys:
            self.owner.popitem(last=False)

    def completed(self, replica: Hashable) -> None:
        if self.in_flight[replica] > 0:
            self.in_flight[replica] -= 1

    def forget(self, replica: Hashable) -> None:
        """A replica is gone: its keys go to whichever replica serves them next."""
        self.in_flight.pop(replica, None)
        for k in [k for k, r in self.owner.items() if r == replica]:
            del self.owner[k]


def routing_key(args: Sequence, prefix_tokens: int) -> Hashable | None:
    """The prefix key of a completion request (its ``user``, else its prompt's first items)."""
    for arg in args:
        user = getattr(arg, "user", None)
        if user:
            return ("user", str(user))
        prompt = getattr(arg, "prompt", None)
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (list, str)):
            prompt = prompt[0]  # one prompt sent as a batch of one
        if isinstance(prompt, str) and prompt:
            return ("text", prompt[:4 * prefix_tokens])
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt[:prefix_tokens]):
            return ("ids", tuple(prompt[:prefix_tokens]))
    return None


class PrefixAffinityRouter(RequestRouter):
    """Serve request router: one prefix group, one replica (see the module docstring)."""

    def initialize_state(self, prefix_tokens: int = 256, max_keys: int = MAX_KEYS):
        self._prefix_tokens, self._table = prefix_tokens, AffinityTable(max_keys)

    def _key(self, pending_request: PendingRequest | None) -> Hashable | None:
        return None if pending_request is None else routing_key(pending_request.args or (), self._prefix_tokens)

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        by_id = {r.replica_id: r for r in candidate_replicas}
        ranks = self._table.rank(self._key(pending_request), list(by_id))
        return [[by_id[i] for i in rank] for rank in ranks if rank]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result) -> None:
        self._table.routed(self._key(pending_request), replica_id)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        self._table.completed(replica_id)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self._table.forget(replica_id)
