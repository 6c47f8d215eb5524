"""Ask again until the answer parses: the one re-ask stage of every benchmark that re-asks.

A benchmark says, per sample, which questions are asked now (``Ask``: where the question's
state lives, the requests of its next attempt, how its texts parse); :func:`reask_stage` turns
that into a ``LoopStage``: each round asks every still-pending question of the batch, parses
the answers and keeps one state per question in the sample, ``sample[field][key]``::

    {"attempts": calls made, "texts": the raw text of every call, in order (an attempt of n
     completions adds n), "answer": the parsed answer (None until one parses),
     "parse_error": why the last attempt did not parse (None once one did),
     "state": "pending" | "ok" | "missed"}

plus the facts the ``Ask`` records about itself (``info``). An answer that does not parse is asked
again (the benchmark's ``render`` sees the state, e.g. to raise the seed or quote the last
reply) until ``max_attempts`` attempts have been made; the question is then ``missed``.

One vocabulary for the rates (:class:`Tally`): ``missed_rate`` = questions given up / questions
asked; ``noncompliance`` = attempts that did not parse / attempts. Benchmarks report them under
their papers' names (Beyond Utility's compliance = 1 − noncompliance; GISTBench's failed
chunks = missed extraction questions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

from llmrec.pipelines.protocol import LoopStage, Sample
from llmrec.types import Request, Result

PENDING, OK, MISSED = "pending", "ok", "missed"
NO_PARSE = "the answer does not parse"


@dataclass(frozen=True)
class Ask:
    """One question of a sample.

    ``render(state) -> list[Request]``: the ``n`` requests of the next attempt (``state`` is the
    question's state so far: ``attempts``, ``texts``...). ``parse(texts) -> answer``: the answer of
    one attempt's ``n`` texts; None, or a raised ``ValueError`` (its message becomes
    ``parse_error``), when they do not parse. ``info``: facts about the question kept in its state.
    """

    field: str
    key: str
    render: Callable[[dict], list[Request]]
    parse: Callable[[list[str]], Any]
    n: int = 1
    info: dict = field(default_factory=dict)


def state(sample: Sample, field_: str, key: str) -> dict | None:
    """The state of question ``key`` in ``sample[field_]`` (None: never asked)."""
    return (sample.get(field_) or {}).get(key)


def states(sample: Sample, field_: str) -> dict[str, dict]:
    return sample.get(field_) or {}


def pending(sample: Sample, field_: str, key: str) -> bool:
    """True while question ``key`` still needs an attempt (never asked, or asked and not settled)."""
    st = state(sample, field_, key)
    return st is None or st["state"] == PENDING


def answer(sample: Sample, field_: str, key: str) -> Any:
    """The parsed answer of question ``key``; None when never asked, pending or missed."""
    st = state(sample, field_, key)
    return None if st is None else st["answer"]


States = dict[str, dict[str, Any]]
"""A re-asked field's value, as a payload declares it: question key → its state (``new_state``'s keys plus the
question's own info)."""


def new_state(info: dict | None = None) -> dict:
    return {**(info or {}), "attempts": 0, "texts": [], "answer": None, "parse_error": None, "state": PENDING}


def record_attempt(st: dict, texts: list[str], parse: Callable[[list[str]], Any], max_attempts: int) -> dict:
    """The state after one more attempt whose calls returned ``texts``."""
    try:
        value, error = parse(texts), None
    except ValueError as e:
        value, error = None, str(e) or NO_PARSE
    if value is None and error is None:
        error = NO_PARSE
    attempts = st["attempts"] + 1
    settled = OK if value is not None else (MISSED if attempts >= max_attempts else PENDING)
    return {**st, "attempts": attempts, "texts": [*st["texts"], *texts], "answer": value, "parse_error": error,
            "state": settled}


@dataclass(frozen=True)
class Tally:
    """Counts over question states (see the module doc for the two rates)."""

    questions: int
    attempts: int
    unparsed: int
    missed: int

    @property
    def missed_rate(self) -> float:
        return self.missed / self.questions if self.questions else float("nan")

    @property
    def noncompliance(self) -> float:
        return self.unparsed / self.attempts if self.attempts else float("nan")


def tally(sts: Iterable[dict | None]) -> Tally:
    """Questions, attempts, attempts that did not parse, and questions given up, over ``sts``
    (None entries: questions never asked, skipped)."""
    sts = [s for s in sts if s is not None]
    attempts = sum(s["attempts"] for s in sts)
    return Tally(len(sts), attempts, attempts - sum(s["state"] == OK for s in sts),
                 sum(s["state"] == MISSED for s in sts))


def reask_stage(name: str, asks: Callable[[Sample], list[Ask]], max_attempts: int, *,
                fields: tuple[str, ...], fold: Callable[[Sample], dict] | None = None,
                folds: tuple[str, ...] = (), engine: Literal["subject", "judge"] = "subject",
                max_rounds: int | None = None, reads: tuple[str, ...] = ()) -> LoopStage:
    """A ``LoopStage`` asking ``asks(sample)`` (those still pending) until each parses or is missed.

    ``asks`` must depend on the sample alone (``accept`` recomputes it to match answers to
    questions). ``fields``: the sample fields holding question states; ``fold(sample) -> dict``:
    fields derived from the updated states after every round (their names in ``folds``), e.g. a
    prediction assembled from the answers. ``max_rounds`` defaults to ``max_attempts`` + 1.
    """
    if max_attempts < 1:
        raise ValueError(f"stage {name}: max_attempts must be >= 1, got {max_attempts}")

    def open_asks(sample: Sample) -> list[Ask]:
        return [a for a in asks(sample) if pending(sample, a.field, a.key)]

    def next_requests(sample: Sample) -> list[Request]:
        return [r for a in open_asks(sample) for r in a.render(state(sample, a.field, a.key) or new_state(a.info))]

    def accept(sample: Sample, requests: list[Request], results: list[Result]) -> dict:
        todo = open_asks(sample)
        if len(results) != sum(a.n for a in todo):
            raise ValueError(f"stage {name}: {len(results)} results for {len(todo)} question(s) of "
                             f"{sum(a.n for a in todo)} call(s)")
        out: dict[str, dict] = {}
        pos = 0
        for a in todo:
            texts = [r.text for r in results[pos:pos + a.n]]
            pos += a.n
            sts = out.setdefault(a.field, dict(states(sample, a.field)))
            st = {**(sts.get(a.key) or new_state()), **a.info}
            sts[a.key] = record_attempt(st, texts, a.parse, max_attempts)
        if fold is not None:
            out.update(fold({**sample, **out}))
        return out

    return LoopStage(name, next_requests, accept, engine=engine, max_rounds=max_rounds or max_attempts + 1,
                     reads=reads, writes=tuple(fields) + tuple(folds))
