"""The point / pair / list stages: rounds of requests driven by the sample's own state.

Each prompt is a *slot* (point: one per user ``u0, u1 ...``; list: ``list``; pair: one per
ordered user pair ``a>b``), a question of a re-ask stage (``common.reask``): a slot is asked
again (next seed) while its answer does not parse, up to ``sampling.max_attempts`` calls,
then recorded as ``missed``. With ``prompt.samples = m`` each call is m completions and the
most common raw text is parsed. State lives in the sample (``answers``: slot → the
question's state), so a round can be replayed from the sample alone. Pairwise slots come
from replaying the heapsort on the memo of settled slots (``ranking.next_comparison``).
"""

from __future__ import annotations

import logging
from functools import partial

from llmrec.pipelines.common import reask
from llmrec.pipelines.common.reask import Ask, reask_stage
from llmrec.pipelines.protocol import LoopStage
from llmrec.pipelines.benchmarks.perrecbench import parsing, prompts, ranking
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.profiles import profile_of
from llmrec.types import Constraint, Request, SamplingParams

log = logging.getLogger(__name__)

# enums, not minimum/maximum: llama.cpp's schema-to-grammar ignores integer bounds, and a base
# model then writes digits until max_tokens
POINT_SCHEMA = {"type": "object", "properties": {"predicted_rating": {"enum": [1, 2, 3, 4, 5]}},
                "required": ["predicted_rating"], "additionalProperties": False}
PAIR_CHOICES = ["[User A]", "[User B]"]


def list_schema(n: int) -> dict:
    ranking_ = {"type": "array", "items": {"enum": list(range(1, n + 1))}, "minItems": n, "maxItems": n}
    return {"type": "object", "properties": {"predicted_ranking": ranking_}, "required": ["predicted_ranking"],
            "additionalProperties": False}


def _pending(sample: dict, tag: str) -> bool:
    return reask.pending(sample, "answers", tag)


def _pair_memo(sample: dict) -> dict[str, str | None]:
    return {t: a["answer"] for t, a in reask.states(sample, "answers").items() if a["state"] != reask.PENDING}


def open_slots(sample: dict) -> list[str]:
    """Slots this round asks, in a fixed order (empty: the sample is done)."""
    mode, n = sample["mode"], sample["size"]
    if mode == "point":
        return [f"u{i}" for i in range(n) if _pending(sample, f"u{i}")]
    if mode == "list":
        return ["list"] if _pending(sample, "list") else []
    nxt = ranking.next_comparison(n, _pair_memo(sample))
    if isinstance(nxt, list):
        return []
    a, b = nxt
    return [t for t in (ranking.pair_key(a, b), ranking.pair_key(b, a)) if _pending(sample, t)]


def _shots_text(cfg: PerRecBenchConfig, sample: dict, shots: list[dict]) -> str:
    tpl, mode = sample["_templates"]["user"], sample["mode"]
    out = ""
    for shot in shots:
        profs = [profile_of(cfg, sample, u) for u in shot["users"]]
        if mode == "point":
            text = prompts.point_prompt(tpl, shot["users"][0], profs[0], shot["item"])
        elif mode == "list":
            text = prompts.list_prompt(tpl, shot["users"], profs, shot["item"])
        else:
            text = prompts.pair_prompt(tpl, shot["users"][0], shot["users"][1], profs[0], profs[1], shot["item"])
        out += prompts.with_answer(text, shot["answer"])
    return out


def prompt_text(cfg: PerRecBenchConfig, sample: dict, tag: str) -> str:
    """The user message of a slot: few-shot demonstrations, then the task prompt."""
    tpl, users, query, mode = sample["_templates"]["user"], sample["_users"], sample["_query"], sample["mode"]
    shots = sample.get("_shots") or []
    if mode == "point":
        i = int(tag[1:])
        return _shots_text(cfg, sample, shots[i] if shots else []) + prompts.point_prompt(
            tpl, users[i], profile_of(cfg, sample, users[i]), query)
    if mode == "list":
        return _shots_text(cfg, sample, shots) + prompts.list_prompt(
            tpl, users, [profile_of(cfg, sample, u) for u in users], query)
    a, b = (int(x) for x in tag.split(">"))
    return _shots_text(cfg, sample, shots) + prompts.pair_prompt(
        tpl, users[a], users[b], profile_of(cfg, sample, users[a]), profile_of(cfg, sample, users[b]), query)


def constraint(cfg: PerRecBenchConfig, sample: dict) -> Constraint | None:
    if not cfg.sampling.constrained or cfg.prompt.cot:
        return None
    mode = sample["mode"]
    if mode == "pair":
        return Constraint(choices=PAIR_CHOICES)
    return Constraint(json_schema=POINT_SCHEMA if mode == "point" else list_schema(sample["size"]))


def slot_requests(cfg: PerRecBenchConfig, sample: dict, tag: str, attempt: int = 0) -> list[Request]:
    s, m = cfg.sampling, cfg.prompt.samples
    msgs = prompts.messages(sample["_templates"]["system"], prompt_text(cfg, sample, tag), cfg.prompt.system_in_user)
    max_tokens = s.pair_max_tokens if sample["mode"] == "pair" else s.max_tokens
    cons = constraint(cfg, sample)
    return [Request(messages=msgs, constraint=cons, prefix_key=f"perrecbench/{sample['mode']}",
                    sampling=SamplingParams(temperature=s.temperature, max_tokens=max_tokens,
                                            seed=s.seed + attempt * m + j))
            for j in range(m)]


def parse(sample: dict, text: str | None) -> object:
    mode = sample["mode"]
    if mode == "point":
        return parsing.parse_point(text)
    if mode == "list":
        return parsing.parse_list(text, sample["size"])
    return parsing.parse_pair(text)


def finalize(sample: dict) -> object:
    """The contract prediction once every needed slot is settled, else None."""
    if open_slots(sample):
        return None
    answers, mode = sample.get("answers") or {}, sample["mode"]
    if mode == "point":
        return [answers[f"u{i}"]["answer"] for i in range(sample["size"])]
    if mode == "list":
        return answers["list"]["answer"]
    return ranking.next_comparison(sample["size"], _pair_memo(sample))


def pair_ties(sample: dict) -> list[list[int]] | None:
    """Pair mode: the user pairs (1-based) the model compared in both prompt orders and preferred in neither
    (each answer named the same position, or one never parsed): ties the heapsort broke by its own order."""
    if sample.get("mode") != "pair":
        return None
    memo = _pair_memo(sample)
    out = []
    for a in range(sample["size"]):
        for b in range(a + 1, sample["size"]):
            ab, ba = ranking.pair_key(a, b), ranking.pair_key(b, a)
            if ab in memo and ba in memo and not parsing.prefers_first(memo[ab], memo[ba]) \
                    and not parsing.prefers_first(memo[ba], memo[ab]):
                out.append([a + 1, b + 1])
    return out


def slot_asks(cfg: PerRecBenchConfig, mode: str, sample: dict) -> list[Ask]:
    """The open slots of a ``mode`` sample as re-ask questions (the m texts of an attempt: majority vote)."""
    if sample["mode"] != mode:
        return []

    def ask(tag: str) -> Ask:
        return Ask("answers", tag, lambda st: slot_requests(cfg, sample, tag, st["attempts"]),
                   lambda texts: parse(sample, parsing.majority_vote(texts)), n=cfg.prompt.samples)
    return [ask(tag) for tag in open_slots(sample)]


def mode_stage(cfg: PerRecBenchConfig, mode: str) -> LoopStage:
    largest = max(cfg.groups.sizes[lv] for lv in cfg.levels)
    rounds = cfg.sampling.max_attempts * (largest * (largest - 1) // 2 if mode == "pair" else 1) + 1
    return reask_stage(mode, partial(slot_asks, cfg, mode), cfg.sampling.max_attempts, fields=("answers",),
                       fold=lambda sample: {"prediction": finalize(sample)}, folds=("prediction",),
                       max_rounds=rounds, reads=("mode", "size", "_templates", "_users"))


def build_stages(cfg: PerRecBenchConfig) -> list[LoopStage]:
    if cfg.prompt.cot and cfg.sampling.constrained:
        log.info("perrecbench: chain-of-thought prompts are sent without output constraints")
    return [mode_stage(cfg, mode) for mode in cfg.modes]
