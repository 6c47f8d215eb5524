"""How people read one stored sample: ``Explains.explain`` returns an :class:`Explanation` (answer, gold,
verdict, reason, numbers); the helpers here are the rules every benchmark shares (a failed sample, a scored choice).
Apart from the protocol so a reader of results needs only this and the run directory."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["right", "wrong", "missed", "failed"]
"""A sample's verdict as people read it: ``right`` / ``wrong`` (scored), ``missed`` (answered, but no answer could be
read from it), ``failed`` (no answer: the engine or a stage failed, or the prompt was over the context)."""


class Explanation(BaseModel):
    """One stored sample as people read it (``Explains.explain``): the parsed answer and the gold as the benchmark
    means them (words, titles, ranks — not ids or raw floats), the verdict, the reason where there is one (the
    judge's rationale, the parse that failed, the error) and the numbers behind the verdict."""

    model_config = ConfigDict(extra="forbid")

    answer: str | None = None
    gold: str | None = None
    verdict: Verdict | None = Field(None, description="None: the benchmark has no right/wrong for this sample")
    reason: str | None = None
    numbers: dict[str, float | int | bool | str | None] = Field(default_factory=dict)

    def words(self) -> str:
        """The verdict cell: ``wrong — answered C (gold B); correct=False``."""
        head = " — ".join(x for x in (self.verdict, self.reason) if x)
        nums = ", ".join(f"{k}={_number_text(v)}" for k, v in self.numbers.items() if v is not None)
        return "; ".join(x for x in (head, nums) if x)

    def cells(self) -> dict[str, str | None]:
        """The report's drill-down cells ``answer``, ``gold`` and ``verdict`` (in words)."""
        return {"answer": self.answer, "gold": self.gold, "verdict": self.words() or None}


def _number_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if math.isfinite(v) else str(v)
    return str(v)


def choice_verdict(correct: Any, missed: Any = None) -> Verdict | None:
    """The verdict of a scored choice: ``missed`` when no answer was read, else ``right`` / ``wrong``; None when
    the sample was not scored. The one right/wrong/missed rule every benchmark uses."""
    if missed:
        return "missed"
    if correct is None:
        return None
    return "right" if correct else "wrong"


def failed_explanation(row: dict) -> Explanation | None:
    """A sample that did not finish (status failed / over_context) as ``failed`` with its error as the reason;
    None for an answered one."""
    status = row.get("status") or "ok"
    if status == "ok":
        return None
    why = row.get("error") or ("the prompt is over the engine's context" if status == "over_context" else status)
    stage = row.get("failed_stage")
    return Explanation(verdict="failed", reason=f"{status}{f' in {stage}' if stage else ''}: {why}",
                       answer=last_output(row))


def last_output(row: dict) -> str | None:
    """The text of the last call of a stored sample's last stage (None: no text)."""
    last = list((row.get("outputs") or {}).values())[-1:]
    results = last[0] if last and isinstance(last[0], list) else last
    text = results[-1].get("text") if results and isinstance(results[-1], dict) else None
    return text if isinstance(text, str) else None


def as_words(value: Any) -> str | None:
    """A stored value as a cell's text: None stays None, a list is comma-separated, anything else ``str``."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)
