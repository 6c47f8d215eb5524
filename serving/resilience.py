"""Bounded retries with exponential backoff around any engine.

A batch that raises is retried; if it still fails, its requests are retried one by one so
one bad request cannot fail its neighbours. A request that still fails becomes a
``Result(finish_reason="error")`` carrying the error text; a prompt over the context
becomes ``finish_reason="over_context"`` at once (retrying cannot help).
"""

from __future__ import annotations

import logging
import time

from llmrec.errors import ContextOverflow
from serving.types import Request, Result

log = logging.getLogger(__name__)


def _attempt(engine, requests: list[Request], retries: int, backoff_s: float) -> list[Result]:
    delay = backoff_s
    for attempt in range(retries + 1):
        try:
            return engine.generate(requests)
        except ContextOverflow:
            raise
        except Exception as e:  # noqa: BLE001 - any engine failure is retried, then recorded
            if attempt == retries:
                raise
            log.warning("engine call failed (%s); retry %d/%d in %.1fs", e, attempt + 1, retries, delay)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def generate_resilient(engine, requests: list[Request], retries: int = 3, backoff_s: float = 1.0) -> list[Result]:
    if not requests:
        return []
    try:
        return _attempt(engine, requests, retries if len(requests) == 1 else 0, backoff_s)
    except ContextOverflow as e:
        if len(requests) == 1:
            return [Result(finish_reason="over_context", prompt_tokens=e.prompt_tokens, error=str(e),
                           request_id=requests[0].request_id)]
    except Exception as e:  # noqa: BLE001
        if len(requests) == 1:
            return [Result(finish_reason="error", error=f"{type(e).__name__}: {e}", request_id=requests[0].request_id)]
    out: list[Result] = []
    for req in requests:
        out.extend(generate_resilient(engine, [req], retries, backoff_s))
    return out
