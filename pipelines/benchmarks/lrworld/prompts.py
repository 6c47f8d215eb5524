"""Row → messages. One template per factor (``templates/<factor>.txt``; the four attribute-like
knowledge factors share ``knowledge.txt``), following the structure of the paper's Figure 13
in our own wording: history or target, the question, numbered (HitRate@1, 10 candidates) or
lettered (MCQ, 4 options) choices, then the answer instruction. Any file can be replaced
by one of the same name in ``templates_dir``.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig
from llmrec.pipelines.common.templates import fill, load_template
from llmrec.types import Message

PACKAGE_DIR = Path(__file__).parent
VERBS = {"movie": "watched", "music artist": "listened to", "product": "bought"}
QUESTIONS = {
    "genres": "Which genres does it have?",
    "decade": "In which decade was it released?",
    "tag": "Which tag describes its music best?",
    "brand": "Which brand is it from?",
    "director": "Who directed it?",
    "root": "Which top-level category does it belong to?",
    "intermediate": "Which second-level category does it belong to?",
    "leaf": "Which most specific category does it belong to?",
}
TEMPLATE_OF = {"entity_relation": "knowledge", "entity_attribute": "knowledge", "taxonomy": "knowledge"}


def template(cfg: LRWorldConfig, name: str) -> str:
    override = cfg.templates_dir / name if cfg.templates_dir and (cfg.templates_dir / name).is_file() else None
    return load_template(PACKAGE_DIR, name, override)


def option_lines(kind: str, options: list[str]) -> str:
    if kind == "hit1":
        return "\n".join(f"{k}. {o}" for k, o in enumerate(options, 1))
    return "\n".join(f"{chr(65 + k)}) {o}" for k, o in enumerate(options))


def instruction(kind: str, cot: bool, cfg: LRWorldConfig) -> str:
    label = "number" if kind == "hit1" else "letter"
    if cot:
        return fill(template(cfg, "cot.txt"), label=label).rstrip("\n")
    what = "one candidate" if kind == "hit1" else "one option"
    return f"Answer with the {label} of {what} only.\nAnswer:"


def question_text(cfg: LRWorldConfig, row: dict, cot: bool = False) -> str:
    """The task prompt of one row (or of a few-shot example, which carries the same fields)."""
    domain = row.get("domain") or "item"
    hist = row.get("history") or []
    body = fill(
        template(cfg, f"{TEMPLATE_OF.get(row['factor'], row['factor'])}.txt"),
        domain=domain, domains=f"{domain}s", verb=VERBS.get(domain, "interacted with"),
        history="\n".join(f"{k}. {h}" for k, h in enumerate(hist, 1)),
        target=row.get("target") or "", question=QUESTIONS.get(row["field"], ""),
        options=option_lines(row["kind"], row["options"]), instruction=instruction(row["kind"], cot, cfg))
    return body.rstrip("\n")


def messages(cfg: LRWorldConfig, row: dict) -> list[Message]:
    cot = row.get("variant") == "cot"
    shots = "".join(fill(template(cfg, "shot.txt"), prompt=question_text(cfg, s), answer=s["gold"])
                    for s in row.get("_shots") or [])
    return [Message(role="system", content=template(cfg, "system.txt").strip()),
            Message(role="user", content=shots + question_text(cfg, row, cot))]
