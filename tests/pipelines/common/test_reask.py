"""The one re-ask stage (``common.reask``) run by the real worker on a scripted engine."""

from __future__ import annotations

import math

import pytest

from llmrec.pipelines.common import reask
from llmrec.pipelines.common.reask import Ask, States, reask_stage
from llmrec.pipelines.protocol import Benchmark, BenchmarkConfig, Payload
from llmrec.pipelines.runner.worker import process_samples
from llmrec.types import Message, Request, Result, SamplingParams


class Scripted:
    """Replies ``script[(question, seed)]`` (default "nope") and records every request."""

    def __init__(self, script: dict[tuple[str, int], str]):
        self.script, self.seen = script, []

    def generate(self, requests: list[Request]) -> list[Result]:
        self.seen += requests
        return [Result(text=self.script.get((r.messages[0].content, r.sampling.seed), "nope"), finish_reason="stop")
                for r in requests]


def parse_int(texts: list[str]) -> int:
    try:
        return int(texts[0])
    except ValueError:
        raise ValueError(f"not a number: {texts[0]!r}") from None


def asks(sample: dict, n: int = 1) -> list[Ask]:
    def ask(q: str) -> Ask:
        return Ask("answers", q, lambda st: [Request(messages=[Message(role="user", content=q)],
                                                     sampling=SamplingParams(seed=st["attempts"] * n + j))
                                             for j in range(n)],
                   parse_int if n == 1 else lambda texts: int(texts[-1]) if texts[-1].isdigit() else None, n=n,
                   info={"asked": q})
    return [ask(q) for q in sample["questions"]]


class QuestionsPayload(Payload):
    questions: list[str]
    answers: States | None = None
    total: int | None = None


class OneStage(Benchmark):
    name, config_cls = "reask-test", BenchmarkConfig
    payload = QuestionsPayload

    def __init__(self, stage):
        self._stage = stage

    def stages(self, cfg):
        return [self._stage]

    def score(self, cfg, sample):
        return {}


def run(stage, engine, *questions) -> dict:
    bench, cfg = OneStage(stage), BenchmarkConfig(name="reask-test")
    (out,) = process_samples(bench, cfg, [{"sample_id": "s", "questions": list(questions)}], lambda role: engine,
                             retries=0, backoff_s=0)
    assert out["status"] == "ok", out["error"]
    return out


def total(sample: dict) -> dict:
    return {"total": sum(st["answer"] or 0 for st in reask.states(sample, "answers").values())}


def test_parses_on_the_second_attempt_and_asks_no_more():
    engine = Scripted({("a", 0): "7", ("b", 1): "5"})
    stage = reask_stage("ask", asks, 3, fields=("answers",), fold=total, folds=("total",))
    out = run(stage, engine, "a", "b")
    a, b = out["answers"]["a"], out["answers"]["b"]
    assert a == {"asked": "a", "attempts": 1, "texts": ["7"], "answer": 7, "parse_error": None, "state": "ok"}
    assert b == {"asked": "b", "attempts": 2, "texts": ["nope", "5"], "answer": 5, "parse_error": None, "state": "ok"}
    assert out["total"] == 12
    assert [(r.messages[0].content, r.sampling.seed) for r in engine.seen] == [("a", 0), ("b", 0), ("b", 1)]


def test_gives_up_after_max_attempts_keeping_every_text_and_the_parse_error():
    engine = Scripted({("b", 0): "x1", ("b", 1): "x2", ("b", 2): "x3", ("b", 3): "4"})
    out = run(reask_stage("ask", asks, 3, fields=("answers",)), engine, "b")
    b = out["answers"]["b"]
    assert b["state"] == "missed" and b["attempts"] == 3 and b["answer"] is None
    assert b["texts"] == ["x1", "x2", "x3"] and b["parse_error"] == "not a number: 'x3'"
    assert len(engine.seen) == 3  # the fourth attempt, which would parse, is never asked


def test_several_completions_per_attempt_keep_all_texts_and_parse_none_is_a_parse_error():
    engine = Scripted({("a", 2): "x", ("a", 3): "8"})
    stage = reask_stage("ask", lambda s: asks(s, n=2), 2, fields=("answers",))
    a = run(stage, engine, "a")["answers"]["a"]
    assert a["texts"] == ["nope", "nope", "x", "8"] and a["attempts"] == 2 and a["answer"] == 8
    missed = run(reask_stage("ask", lambda s: asks(s, n=2), 1, fields=("answers",)), Scripted({}), "a")["answers"]["a"]
    assert missed["state"] == "missed" and missed["parse_error"] == reask.NO_PARSE


def test_missed_rate_and_noncompliance_are_defined_over_question_states():
    sts = [{"attempts": 1, "state": "ok"}, {"attempts": 3, "state": "ok"}, {"attempts": 3, "state": "missed"},
           None]  # never asked: not counted
    t = reask.tally(sts)
    assert (t.questions, t.attempts, t.unparsed, t.missed) == (3, 7, 5, 1)
    assert t.missed_rate == pytest.approx(1 / 3) and t.noncompliance == pytest.approx(5 / 7)
    empty = reask.tally([])
    assert math.isnan(empty.missed_rate) and math.isnan(empty.noncompliance)


def test_a_result_count_that_does_not_match_the_questions_fails_the_sample():
    stage = reask_stage("ask", asks, 2, fields=("answers",))
    with pytest.raises(ValueError, match="2 results for 1 question"):
        stage.accept({"sample_id": "s", "questions": ["a"]}, [], [Result(text="1"), Result(text="2")])
    with pytest.raises(ValueError, match="max_attempts"):
        reask_stage("ask", asks, 0, fields=("answers",))
