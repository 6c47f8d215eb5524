"""User profiles: an LLM summary of the user's history before the query, written once per
(user, history cut, model) and reused by every task.

The profile request depends only on the user's items before the cut (the most recent
``prompt.profile_items``) and the profile template, so every sample holding the same user
at the same cut sends the identical request; the runner's request cache (keyed by the
engine identity, i.e. the model) answers all but the first. Samples are ordered mode by
mode (``prefix_key``), so one mode's samples fill the cache the others read. With
``prompt.profile: false`` there is no profile stage and user blocks carry neither the
profile nor the rating lines (the reference's "without profile" variant).
"""

from __future__ import annotations

from functools import partial

from llmrec.pipelines.protocol import LoopStage
from llmrec.pipelines.benchmarks.perrecbench import prompts
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.types import Message, Request, Result, SamplingParams


def _shot_users(sample: dict) -> list[dict]:
    shots = sample.get("_shots") or []
    flat = [s for per_user in shots for s in per_user] if sample["mode"] == "point" else shots
    return [u for s in flat for u in s["users"]]


def profile_users(sample: dict) -> list[dict]:
    """Distinct users (by key = user@cut) of the sample and of its few-shot demonstrations."""
    seen: dict[str, dict] = {}
    for u in list(sample["_users"]) + _shot_users(sample):
        seen.setdefault(u["key"], u)
    return list(seen.values())


def missing(sample: dict) -> list[dict]:
    have = sample.get("profiles") or {}
    return [u for u in profile_users(sample) if u["key"] not in have]


def profile_request(cfg: PerRecBenchConfig, sample: dict, user: dict) -> Request:
    text = prompts.profile_prompt(sample["_templates"]["profile"], user["profile_items"])
    s = cfg.sampling
    return Request(messages=[Message(role="user", content=text)],
                   sampling=SamplingParams(temperature=s.profile_temperature, max_tokens=s.profile_max_tokens,
                                           seed=s.seed),
                   prefix_key="perrecbench/profile")


def next_requests(cfg: PerRecBenchConfig, sample: dict) -> list[Request]:
    return [profile_request(cfg, sample, u) for u in missing(sample)]


def accept(cfg: PerRecBenchConfig, sample: dict, requests: list[Request], results: list[Result]) -> dict:
    profiles = dict(sample.get("profiles") or {})
    for user, result in zip(missing(sample), results):
        profiles[user["key"]] = result.text.strip()
    return {"profiles": profiles}


def profile_stage(cfg: PerRecBenchConfig) -> LoopStage | None:
    if not cfg.prompt.profile:
        return None
    return LoopStage("profile", partial(next_requests, cfg), partial(accept, cfg), engine=cfg.profile_engine,
                     max_rounds=2, reads=("mode", "_users", "_templates"), writes=("profiles",))


def profile_of(cfg: PerRecBenchConfig, sample: dict, user: dict) -> str | None:
    """The user's profile text for a prompt, or None in the 'without profile' variant."""
    if not cfg.prompt.profile:
        return None
    return (sample.get("profiles") or {}).get(user["key"], "")
