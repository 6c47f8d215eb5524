"""Stages: an optional profile generation, then the ranking question asked until it complies.

``profile`` (profile / profile_history prompts only): the reference's profile-generation
template from the shown history; only the answer's last paragraph is kept (cells 21-22).
``rank``: system prompt + one paraphrase; the first call at temperature 0, a non-compliant
answer (no parsable list) is asked again at ``query.retry_temperature`` with the next seed, up
to ``query.max_attempts`` calls (the reference re-asks without bound, ``zero_shot.py:51-79``).
"""

from __future__ import annotations

from functools import partial

from llmrec.pipelines.benchmarks.beyond_utility import parsing, prompts
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.protocol import LLMStage, LoopStage
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


def next_rank(cfg: BeyondUtilityConfig, sample: dict) -> list[Request]:
    attempts = sample.get("attempts") or 0
    if sample.get("titles") is not None or attempts >= cfg.query.max_attempts or sample.get("rank_error"):
        return []
    return [rank_request(cfg, sample, attempts)]


def accept_rank(cfg: BeyondUtilityConfig, sample: dict, requests: list[Request], results: list[Result]) -> dict:
    result = results[0]
    attempts = (sample.get("attempts") or 0) + 1
    raws = list(sample.get("raw_answers") or []) + [result.text]
    if not result.ok:  # over context / failed request: retrying the same prompt cannot help
        return {"attempts": attempts, "raw_answers": raws, "rank_error": result.error or result.finish_reason}
    titles = parsing.parse_titles(result.text)
    return {"attempts": attempts, "raw_answers": raws, "titles": titles,
            "noncompliant": (sample.get("noncompliant") or 0) + (titles is None)}


def build_stages(cfg: BeyondUtilityConfig) -> list:
    out = []
    if set(cfg.prompts) & set(PROFILE_PROMPTS):
        out.append(LLMStage("profile", partial(render_profile, cfg), accept_profile,
                            requires=("prompt", "_profile_text", "_history_titles"),
                            adds=("profile", "profile_error")))
    out.append(LoopStage("rank", partial(next_rank, cfg), partial(accept_rank, cfg),
                         max_rounds=cfg.query.max_attempts + 1,
                         requires=("template", "_text", "_history_titles", "_candidate_titles"),
                         adds=("attempts", "raw_answers", "titles", "noncompliant", "rank_error")))
    return out
