"""Bounded retries with exponential backoff around any engine, per request (``serving/retry.py``: the
policy, and why this is the only layer that re-sends).

Engines return one ``Result`` per request: a prompt over the context comes back as
``finish_reason="over_context"`` and a request that failed on its own as ``"error"``,
while the rest of the batch is generated normally. Here only the requests whose result
is an error are sent again (together, after a doubling delay); an over-context result
is final at once (retrying cannot help). An engine that raises failed as a whole: the
batch is retried the same way, and what still fails becomes ``finish_reason="error"``
carrying the error text. Each request is sent at most ``retries + 1`` times; the wait before a
retry is the policy's backoff, or the longest ``Retry-After`` a server gave the failed requests
when that is longer. ``EngineDead`` is never retried here: it propagates so that
Ray restarts the actor or replica holding the engine.
"""

from __future__ import annotations

import logging

from llmrec.errors import ContextOverflow, EngineDead
from llmrec.serving.retry import RetryPolicy
from llmrec.types import Request, Result

log = logging.getLogger(__name__)


def _call(engine, requests: list[Request]) -> list[Result]:
    try:
        results = engine.generate(requests)
    except EngineDead:
        raise
    except ContextOverflow as e:
        # engines report over-context per request; a raise can only be attributed to a lone request
        if len(requests) == 1:
            return [Result.over_context(requests[0], e)]
        return [Result.failure(r, f"ContextOverflow for the whole batch: {e}") for r in requests]
    except Exception as e:  # noqa: BLE001 - any engine failure is retried, then recorded
        return [Result.failure(r, f"{type(e).__name__}: {e}") for r in requests]
    if len(results) != len(requests):
        return [Result.failure(r, f"engine returned {len(results)} results for {len(requests)} requests")
                for r in requests]
    return results


def generate_resilient(engine, requests: list[Request], retries: int = 3, backoff_s: float = 1.0) -> list[Result]:
    if not requests:
        return []
    policy = RetryPolicy(retries, backoff_s)
    out: list[Result] = _call(engine, requests)
    todo = [i for i, r in enumerate(out) if r.finish_reason == "error"]
    for retry in range(1, policy.attempts):
        if not todo:
            break
        hint = max((out[i].retry_after_s for i in todo if out[i].retry_after_s is not None), default=None)
        log.warning("%d of %d request(s) failed (%s); retry %d/%d in %.1fs", len(todo), len(requests),
                    out[todo[0]].error, retry, policy.retries, policy.delay(retry, hint))
        policy.wait(retry, hint)
        again = _call(engine, [requests[i] for i in todo])
        for i, res in zip(todo, again):
            out[i] = res
        todo = [i for i in todo if out[i].finish_reason == "error"]
    return out
