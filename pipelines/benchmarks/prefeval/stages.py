"""PrefEval stages, in order (each skips the samples it does not concern):

pref_reply          subject  [system, user: explicit preference] → the live reply
statement_replies   subject  one [system, user: statement] per extra/conflicting preference (when configured)
answer              subject  conversation + final question of the method (self-critic: initial answer)
critique, revision  subject  self-critic only
judge_acknowledge, judge_violate, judge_helpful, judge_hallucinate   judge (task gen, evaluate: true)
"""

from __future__ import annotations

from llmrec.pipelines.protocol import LLMStage, LoopStage, Sample, sample_assets
from llmrec.pipelines.benchmarks.prefeval import conversation as conv
from llmrec.pipelines.benchmarks.prefeval import prompts
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.judge import fill_prompt, parse_tag
from llmrec.pipelines.benchmarks.prefeval.prompts import LETTERS
from llmrec.pipelines.benchmarks.prefeval.truncation import drop_oldest
from llmrec.types import Constraint, Message, Request, Result, SamplingParams


def _subject(sample: Sample, msgs: list[Message], max_tokens: int, constraint: Constraint | None = None) -> Request:
    return Request(messages=msgs, sampling=SamplingParams(max_tokens=max_tokens), constraint=constraint,
                   prefix_key=sample.get("prefix_key"))


def _choice(cfg: PrefEvalConfig) -> Constraint | None:
    return Constraint(choices=[f"<choice>{c}</choice>" for c in LETTERS]) if cfg.constrain_choice else None


def _out_key(sample: Sample) -> str:
    return "initial_output" if sample.get("method") == "self-critic" else "output"


def subject_stages(cfg: PrefEvalConfig) -> list[LLMStage | LoopStage]:
    mcq = cfg.task == "mcq"

    def render_reply(s: Sample) -> Request | None:
        if s["form"] != "explicit":
            return None
        return _subject(s, prompts.system(cfg) + [Message(**m) for m in s["_preference"]], cfg.pref_reply_tokens())

    def statement_requests(s: Sample) -> list[Request]:
        if "statement_replies" in s or not s.get("_statements"):
            return []
        return [_subject(s, prompts.system(cfg) + [Message(role="user", content=text)], cfg.pref_reply_tokens())
                for _, text in s["_statements"]]

    def accept_statements(s: Sample, reqs: list[Request], results: list[Result]) -> dict:
        return {"statement_replies": {sid: r.text for (sid, _), r in zip(s["_statements"], results)}}

    def render_answer(s: Sample) -> Request:
        return _subject(s, conv.answer_messages(cfg, s), cfg.answer_max_tokens if mcq else cfg.gen_max_tokens,
                        _choice(cfg) if mcq else None)

    def accept_answer(s: Sample, r: Result) -> dict:
        rag = conv.rag_retrieval(cfg, s) if s.get("method") == "rag" else {}
        return {_out_key(s): r.text, "prompt_tokens": r.prompt_tokens, **rag}

    def render_critique(s: Sample) -> Request | None:
        if s.get("method") != "self-critic":
            return None
        return _subject(s, conv.critique_messages(cfg, s), cfg.critique_max_tokens)

    def render_revision(s: Sample) -> Request | None:
        if s.get("method") != "self-critic":
            return None
        return _subject(s, conv.revision_messages(cfg, s), cfg.answer_max_tokens if mcq else cfg.revision_max_tokens,
                        _choice(cfg) if mcq else None)

    def shrink(render):
        return drop_oldest(render) if cfg.truncation == "drop_oldest" else None

    stages: list[LLMStage | LoopStage] = [LLMStage("pref_reply", render_reply, lambda s, r: {"pref_reply": r.text},
                                                        reads=("form", "_preference"), writes=("pref_reply",))]
    if any(cfg.extra_preferences) or cfg.conflicting_preferences is not None:
        stages.append(LoopStage("statement_replies", statement_requests, accept_statements, max_rounds=2,
                                writes=("statement_replies",)))
    stages.append(LLMStage("answer", render_answer, accept_answer, shrink=shrink(render_answer),
                           reads=("question", "_layout"),
                           writes=("initial_output", "output", "prompt_tokens", "rag_retrieved", "rag_pref_hit",
                                   "dropped_pairs")))
    if "self-critic" in cfg.methods:
        stages += [
            LLMStage("critique", render_critique, lambda s, r: {"critique": r.text}, shrink=shrink(render_critique),
                     reads=("question",), writes=("critique", "dropped_pairs")),
            LLMStage("revision", render_revision, lambda s, r: {"output": r.text}, shrink=shrink(render_revision),
                     reads=("question",), writes=("output", "dropped_pairs")),
        ]
    return stages


def judge_request(cfg: PrefEvalConfig, sample: Sample, check: str) -> Request:
    """One judge check: [system: judge system prompt, user: the filled reference prompt]."""
    text = fill_prompt(check, sample_assets(sample)["judge_prompts"][check],
                       question=sample["question"], end_generation=sample.get("output") or "",
                       preference=sample["preference"],
                       assistant_restatement=parse_tag(sample.get("judge_acknowledge"), "preference"))
    msgs = [Message(role="system", content=prompts.template(prompts.texts(sample), "judge_system")), Message(role="user", content=text)]
    return Request(messages=msgs, sampling=SamplingParams(max_tokens=cfg.judge_max_tokens))


def judge_stages(cfg: PrefEvalConfig) -> list[LLMStage]:
    """Acknowledge first: its <preference> text feeds hallucinate, which runs whatever it answered."""

    def stage(check: str) -> LLMStage:
        return LLMStage(f"judge_{check}", lambda s: judge_request(cfg, s, check),
                        lambda s, r: {f"judge_{check}": r.text}, engine="judge",
                        reads=("question", "preference"), writes=(f"judge_{check}",))

    return [stage(c) for c in ("acknowledge", "violate", "helpful", "hallucinate")]


def build_stages(cfg: PrefEvalConfig) -> list[LLMStage | LoopStage]:
    stages = subject_stages(cfg)
    if cfg.task == "gen" and cfg.evaluate:
        stages += judge_stages(cfg)
    return stages
