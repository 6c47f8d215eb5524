"""Requests of every GISTBench step. The benchmark text lives in ``templates/``.

The layout follows the reference: extraction is one user message (no system message);
the IG judge gets a system message, two worked examples and the query; the IS overlap
filter, the IS judge and the taxonomy mapper get a system message and the query.
Placeholders are replaced literally (``llmrec.pipelines.common.templates.fill``), so object
texts may contain braces.
"""

from __future__ import annotations

import json
from pathlib import Path

from llmrec.pipelines.common.templates import fill, load_template
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig, Thresholds
from llmrec.pipelines.benchmarks.gistbench.history import Engagement, format_engagements
from llmrec.pipelines.benchmarks.gistbench.verification import negative_limits, positive_rules
from llmrec.types import Constraint, Message, Request, SamplingParams

HERE = Path(__file__).parent

EXTRACTION_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "interest": {"type": "string"},
            "item_ids": {"type": "array", "items": {"type": "string"}},
            "evidence_excerpt": {"type": "string"},
            "brief_rationale": {"type": "string"},
        },
        "required": ["interest", "item_ids"],
    },
}


def template(name: str) -> str:
    return load_template(HERE, name, None)


def _json(name: str):
    return json.loads(template(name))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def extraction_instructions(object_name: str, signals: frozenset[str] | list[str], t: Thresholds) -> str:
    """The numbered instructions, with the evidence rules generated from the predicate."""
    text = _json("extraction_rules.json")
    items = [fill(text["themes"], object_name=object_name)]
    rules = positive_rules(signals, t)
    if rules:
        lines = [fill(text["positive_item"], requirement=" and ".join(
            _plural(n, f"{kind} engagement") for kind, n in sorted(rule.items(), key=lambda kv: kv[0] != "explicit_positive")
        )) for rule in rules]
        items.append("\n".join([text["positive"], *lines]))
    for kind, limit in negative_limits(signals, t).items():
        items.append(fill(text["negative"], limit=str(limit), kind=kind,
                          engagements="engagement" if limit == 1 else "engagements"))
    items.append(fill(text["per_object"], object_name=object_name))
    items.append(text["fields"])
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def _sampling(max_tokens: int) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens)


def _retry(messages: list[Message], raw: str | None, nudge_key: str) -> list[Message]:
    if raw is None:
        return messages
    return messages + [Message(role="assistant", content=raw), Message(role="user", content=_json("nudges.json")[nudge_key])]


def extraction_template(cfg: GistbenchConfig) -> str:
    """The extraction prompt file's text: ``extraction.template`` if set, else the package's. Read on
    the driver (a benchmark asset): the override path exists only where the driver runs."""
    return load_template(HERE, "extraction.txt", cfg.extraction.template)


def extraction_prompt(template: str, object_name: str, signals, t: Thresholds, chunk: list[Engagement]) -> str:
    return fill(template, object_name=object_name,
                instructions=extraction_instructions(object_name, signals, t), history=format_engagements(chunk))


def extraction_request(cfg: GistbenchConfig, template: str, object_name: str, signals, chunk: list[Engagement],
                       retry_raw: str | None = None) -> Request:
    """``template``: the text of ``extraction_template(cfg)`` (the sample's assets carry it)."""
    text = extraction_prompt(template, object_name, signals, cfg.thresholds, chunk)
    msgs = [Message(role="user", content=text)]
    constraint = None
    if cfg.extraction.json_schema:
        schema = EXTRACTION_SCHEMA
        if cfg.extraction.min_interests:
            schema = {**schema, "minItems": cfg.extraction.min_interests}
        constraint = Constraint(json_schema=schema)
    return Request(messages=_retry(msgs, retry_raw, "extraction"), sampling=_sampling(cfg.extraction.max_tokens),
                   constraint=constraint)


def _ig_user(interest: str, texts: list[str]) -> str:
    items = "\n".join(f"Item {i}: {t}" for i, t in enumerate(texts))
    return fill(template("ig_judge_user.txt"), interest=interest, items=items)


def ig_judge_request(cfg: GistbenchConfig, interest: str, texts: list[str], retry_raw: str | None = None) -> Request:
    msgs = [Message(role="system", content=template("ig_judge_system.txt"))]
    for ex in _json("ig_judge_examples.json"):
        msgs += [Message(role="user", content=_ig_user(ex["interest"], ex["items"])),
                 Message(role="assistant", content=ex["answer"])]
    msgs.append(Message(role="user", content=_ig_user(interest, texts)))
    return Request(messages=_retry(msgs, retry_raw, "indices"), sampling=_sampling(cfg.judge.max_tokens),
                   prefix_key="gistbench/ig-judge")


def overlap_request(cfg: GistbenchConfig, interests: list[str], objects: list[list[str]],
                    retry_raw: str | None = None) -> Request:
    n = cfg.specificity.pool_text_chars
    lines = "\n".join(f"Object {i}: {text[:n]}" for i, (_, text) in enumerate(objects))
    user = fill(template("is_overlap_user.txt"), interests=", ".join(interests), objects=lines)
    msgs = [Message(role="system", content=template("is_overlap_system.txt")), Message(role="user", content=user)]
    return Request(messages=_retry(msgs, retry_raw, "indices"), sampling=_sampling(cfg.judge.max_tokens))


def is_judge_request(cfg: GistbenchConfig, interest: str, items: list[list[str]], count: int,
                     retry_raw: str | None = None) -> Request:
    lines = "\n".join(f"item_{i}: {text}" for i, (_, text) in enumerate(items))
    user = fill(template("is_judge_user.txt"), interest=interest, items=lines, count=str(count))
    msgs = [Message(role="system", content=template("is_judge_system.txt")), Message(role="user", content=user)]
    return Request(messages=_retry(msgs, retry_raw, "selection"), sampling=_sampling(cfg.specificity.max_tokens),
                   prefix_key="gistbench/is-judge")


def taxonomy_request(cfg: GistbenchConfig, names: list[str], categories: list[list]) -> Request:
    cats = "\n".join(f"{cid}. {name}" for cid, name in categories)
    user = fill(template("taxonomy_user.txt"), interests="\n".join(f"{i}. {n}" for i, n in enumerate(names, 1)))
    msgs = [Message(role="system", content=fill(template("taxonomy_system.txt"), categories=cats)),
            Message(role="user", content=user)]
    return Request(messages=msgs, sampling=_sampling(cfg.taxonomy.max_tokens), prefix_key="gistbench/taxonomy")


def taxonomy_batch_names(request: Request) -> list[str]:
    """The interest names a taxonomy request asked about (read back from its last message)."""
    lines = request.messages[-1].content.split("\n")[1:]
    return [line.split(". ", 1)[1] for line in lines if ". " in line]
