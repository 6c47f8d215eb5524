"""The one retry policy: how often a request is sent and how long to wait between its attempts.

Only one layer re-sends a request: ``resilience.generate_resilient``, the caller's side of every engine
(the runner calls it with ``execution.retries`` / ``backoff_s``). The layers below it try once and report a
failure per request instead of retrying it themselves: an engine returns ``finish_reason="error"`` (the
openai engine adds the server's ``Retry-After`` as ``Result.retry_after_s``) and an engine pool does the same
for the requests of an actor that died. A request is therefore sent at most ``retries + 1`` times in all,
however many layers stand between the caller and the model, and ``RetryPolicy.wait`` is the one place that
sleeps between attempts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """``retries``: attempts after the first (``retries + 1`` in all); ``backoff_s``: the wait before the first
    retry, doubling with each further one; a server's ``Retry-After`` wins when it is longer."""

    retries: int = 3
    backoff_s: float = 1.0

    def __post_init__(self):
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError(f"retries and backoff_s must be >= 0, got {self.retries}, {self.backoff_s}")

    @property
    def attempts(self) -> int:
        """Attempts per request in all."""
        return self.retries + 1

    def delay(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 = the second attempt)."""
        if not 1 <= retry <= self.retries:
            raise ValueError(f"retry {retry} is outside the budget of {self.retries} retries")
        backoff = self.backoff_s * 2 ** (retry - 1)
        return max(backoff, retry_after_s) if retry_after_s is not None else backoff

    def wait(self, retry: int, retry_after_s: float | None = None) -> float:
        """Sleep before retry number ``retry``; returns the seconds waited."""
        seconds = self.delay(retry, retry_after_s)
        if seconds > 0:
            time.sleep(seconds)
        return seconds
