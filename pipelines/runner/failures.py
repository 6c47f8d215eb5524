"""How many samples of a run failed, and with which errors: what decides ``llmrec run``'s exit code."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

SHOWN = 3  # distinct errors listed
MESSAGE_CHARS = 300  # a server's error body can be long: the start says what went wrong


@dataclass(frozen=True)
class FailureSummary:
    samples: int
    failed: int
    errors: tuple[tuple[str, str, int], ...]  # (stage, message, samples) of the most frequent errors

    @property
    def share(self) -> float:
        return self.failed / self.samples if self.samples else 0.0

    def exceeds(self, max_share: float) -> bool:
        """More than ``max_share`` of the samples failed, or every sample did (whatever ``max_share``)."""
        return self.failed > 0 and (self.failed == self.samples or self.share > max_share)

    def describe(self, max_share: float) -> str:
        head = (f"{self.failed} of {self.samples} samples failed ({self.share:.0%}; execution.max_failed_share is "
                f"{max_share:g}). The results are stored: fix the cause and re-run the same command to retry the "
                f"failed samples. Most frequent errors:")
        return "\n".join([head] + [f"  [{stage}] {message} ({n} sample{'s' * (n != 1)})"
                                   for stage, message, n in self.errors])


def summarize_failures(rows: list[dict]) -> FailureSummary:
    """Failed rows (``status == "failed"``; over-context samples are not failures) and their errors,
    grouped by (stage, message), most frequent first (ties: first seen first)."""
    counts = Counter((str(r.get("failed_stage") or "?"), str(r.get("error") or "no error message")[:MESSAGE_CHARS])
                     for r in rows if r.get("status") == "failed")
    return FailureSummary(len(rows), sum(counts.values()),
                          tuple((stage, msg, n) for (stage, msg), n in counts.most_common(SHOWN)))
