"""Judge failures beside every judged number: how many of a run's judge calls gave no readable answer.

A judged benchmark (``Judged.judged_metrics`` non-empty: PrefEval generation, GISTBench) writes three metrics
per scope (the run, or a ``<scope>/`` prefix such as GISTBench's ``uih5/``): ``judge_failure_rate`` (the share of
judged units whose judge answer could not be read), ``judge_failed`` (their count) and ``n_judged`` (the units the
judge was asked about: PrefEval's samples, GISTBench's judge questions). What the benchmark's metric does with an
unreadable answer is its reference's rule (PrefEval reference mode: it passes; GISTBench: no evidence kept); this
module makes the rate visible beside each judged headline (run summary, ``rejudge``, leaderboard, report,
``compare``) and decides whether it is too high to trust the headline.

``execution.max_judge_failed_share`` (default :data:`DEFAULT_MAX_SHARE`, 0.1): a judged headline whose judge
failure rate is above it is marked :data:`MARK` and makes ``llmrec run`` / ``llmrec rejudge`` exit 1 (the
results are stored). A judge that failed every call always does, whatever the setting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from llmrec.small_samples import finite_number as _number

RATE = "judge_failure_rate"
FAILED = "judge_failed"
JUDGED = "n_judged"
DEFAULT_MAX_SHARE = 0.1
MARK = "!"  # beside a judged number whose judge failed more often than the threshold
CONFIG_KEY = "execution.max_judge_failed_share"


@dataclass(frozen=True)
class JudgeFailures:
    """The judge failures of one scope of a run ("" or a metric prefix such as ``uih5/``)."""

    scope: str
    rate: float  # NaN: nothing was judged
    failed: float
    judged: float

    def exceeds(self, max_share: float) -> bool:
        """More than ``max_share`` of the judged units failed, or every one did (whatever ``max_share``)."""
        if not math.isfinite(self.rate) or self.rate <= 0:
            return False
        return self.rate > max_share or self.rate >= 1.0

    def text(self) -> str:
        """``judge failed 4/4 (100%)``; ``judge failed 12%`` where the counts are not known."""
        if math.isfinite(self.failed) and math.isfinite(self.judged):
            return f"judge failed {self.failed:.0f}/{self.judged:.0f} ({self.rate:.0%})"
        return f"judge failed {self.rate:.0%}"

    def beside(self, max_share: float) -> str:
        """The text shown beside a judged number: ``judge failed 4/4 (100%) ! > 0.1``."""
        return self.text() + (f" {MARK} > {max_share:g}" if self.exceeds(max_share) else "")


def scope_of(metric: str) -> str:
    """``uih5/ig_f1_median`` → ``uih5/``; ``accuracy`` → ``""``."""
    return metric.rsplit("/", 1)[0] + "/" if "/" in metric else ""


def failures_in(metrics: dict, scope: str = "") -> JudgeFailures | None:
    """The judge failures of ``scope`` in a run's metrics; None when the run has no (finite) judge failure rate
    there (a run without a judge, or whose judge was never asked)."""
    rate = _number(metrics.get(f"{scope}{RATE}"))
    if not math.isfinite(rate):
        return None
    return JudgeFailures(scope, rate, _number(metrics.get(f"{scope}{FAILED}")),
                         _number(metrics.get(f"{scope}{JUDGED}")))


def all_failures(metrics: dict) -> list[JudgeFailures]:
    """Every scope of ``metrics`` that holds a judge failure rate, the run's own first."""
    scopes = sorted({k[: -len(RATE)] for k in metrics if k == RATE or k.endswith("/" + RATE)}, key=lambda s: (s != "", s))
    return [f for f in (failures_in(metrics, s) for s in scopes) if f is not None]


def is_judged(metric: str, judged_metrics: Iterable[str]) -> bool:
    """Whether ``metric`` (possibly scoped, ``uih5/ig_f1_median``) is one of a benchmark's judged metrics."""
    return metric.rsplit("/", 1)[-1] in set(judged_metrics)


def for_metric(metrics: dict, metric: str, judged_metrics: Iterable[str]) -> JudgeFailures | None:
    """The judge failures behind a judged ``metric`` (its scope's, else the run's); None for a metric no judge
    decides or a run without a judge failure rate."""
    if not is_judged(metric, judged_metrics):
        return None
    return failures_in(metrics, scope_of(metric)) or failures_in(metrics)


def too_many(metrics: dict, max_share: float) -> list[JudgeFailures]:
    """The scopes whose judge failed more than ``max_share`` of its calls (or every one)."""
    return [f for f in all_failures(metrics) if f.exceeds(max_share)]


def describe(over: list[JudgeFailures], max_share: float, judged: Iterable[str] = ()) -> str:
    """Why a run exits 1 for its judge: each scope's failures, what the judged numbers are, what to do."""
    parts = [f"{f.scope or 'the run'}: {f.text()}" for f in over]
    names = ", ".join(judged) or "the judged metrics"
    return (f"the judge's answers could not be read: {'; '.join(parts)} ({CONFIG_KEY} is {max_share:g}). "
            f"The judged metrics ({names}) score those answers by the benchmark's reference rule, so they say "
            "little about the subject. "
            "The results are stored: read the judge's replies (llmrec view RUN), then "
            "judge again with another judge (llmrec rejudge RUN --judge JUDGE.yaml), or accept the rate with "
            f"--set {CONFIG_KEY}=X")


def pinned(judged_metrics: Iterable[str]) -> tuple[str, ...]:
    """The judge failure rate as a pinned column beside judged headline metrics (none when nothing is judged)."""
    return (RATE,) if tuple(judged_metrics) else ()
