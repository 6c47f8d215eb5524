"""Stages: an optional profile generation, then the ranking question asked until it complies.

``profile`` (profile / profile_history prompts only): the reference's profile-generation
template from the shown history; only the answer's last paragraph is kept (cells 21-22).
``rank``: system prompt + one paraphrase, a re-ask stage (``common.reask``, its state in
``answers["rank"]``): the first call at temperature 0, a non-compliant answer (no parsable list)
is asked again at ``query.retry_temperature`` with the next seed, up to ``query.max_attempts``
calls (the reference re-asks without bound, ``zero_shot.py:51-79``).
"""

from __future__ import annotations

from functools import partial

from llmrec.pipelines.benchmarks.beyond_utility import parsing, prompts
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.common import reask
from llmrec.pipelines.common.reask import Ask, reask_stage
from llmrec.pipelines.protocol import LLMStage
from llmrec.types import Constraint, Message, Request, Result, SamplingParams

PROFILE_PROMPTS = ("profile", "profile_history")


def _user_name(sample: dict) -> str:
    return str(sample["user_id"])


def render_profile(cfg: BeyondUtilityConfig, sample: dict) -> Request | None:
    if sample["prompt"] not in PROFILE_PROMPTS:
        return None
    text = prompts.render(sample["_profile_text"], "profile_generate", dataset=cfg.dataset_label,
                          user_name=_user_name(sample), history=sample["_history_titles"], candidates=[])
    return Request(messages=[Message(role="user", content=text)],
                   sampling=SamplingParams(temperature=0.0, max_tokens=cfg.query.profile_max_tokens,
                                           seed=cfg.query.seed),
                   prefix_key="beyond_utility/profile")


def accept_profile(sample: dict, result: Result) -> dict:
    return {"profile": prompts.last_paragraph(result.text) if result.ok else "",
            "profile_error": None if result.ok else (result.error or result.finish_reason)}


def answer_schema(titles: list[str], n: int) -> dict:
    return {"type": "array", "items": {"enum": sorted(set(titles))}, "minItems": n, "maxItems": n}


def rank_request(cfg: BeyondUtilityConfig, sample: dict, attempt: int) -> Request:
    text = prompts.render(sample["_text"], sample["template"], dataset=cfg.dataset_label,
                          user_name=_user_name(sample), history=sample["_history_titles"],
                          candidates=sample["_candidate_titles"], profile=sample.get("profile") or "")
    q = cfg.query
    constraint = None
    if q.constrained:
        n = min(cfg.list_len, len(set(sample["_candidate_titles"])))
        constraint = Constraint(json_schema=answer_schema(sample["_candidate_titles"], n))
    return Request(messages=[Message(role="system", content=prompts.system_prompt()),
                             Message(role="user", content=text)],
                   sampling=SamplingParams(temperature=0.0 if attempt == 0 else q.retry_temperature,
                                           max_tokens=q.max_tokens, seed=q.seed + attempt),
                   constraint=constraint, prefix_key="beyond_utility/rank")


RANK = "rank"  # the ranking question's key in the sample's ``answers`` (one question per sample)


def rank_asks(cfg: BeyondUtilityConfig, sample: dict) -> list[Ask]:
    return [Ask("answers", RANK, lambda st: [rank_request(cfg, sample, st["attempts"])],
                lambda texts: parsing.parse_titles(texts[0]))]


def titles(row: dict) -> list[str] | None:
    """The ranked titles of a compliant answer, else None."""
    return reask.answer(row, "answers", RANK)


def rank_state(row: dict) -> dict | None:
    """The ranking question's state (attempts, raw texts...); None when it was never asked."""
    return reask.state(row, "answers", RANK)


def build_stages(cfg: BeyondUtilityConfig) -> list:
    out = []
    if set(cfg.prompts) & set(PROFILE_PROMPTS):
        out.append(LLMStage("profile", partial(render_profile, cfg), accept_profile,
                            reads=("prompt", "_profile_text", "_history_titles"),
                            writes=("profile", "profile_error")))
    out.append(reask_stage("rank", partial(rank_asks, cfg), cfg.query.max_attempts, fields=("answers",),
                           reads=("template", "_text", "_history_titles", "_candidate_titles")))
    return out
