"""Row → messages. One template per factor (``templates/<factor>.txt``; the four attribute-like
knowledge factors share ``knowledge.txt``), following the structure of the paper's Figure 13
in our own wording: history or target, the question, numbered (HitRate@1, 10 candidates) or
lettered (MCQ, 4 options) choices, then the answer instruction. Any file can be replaced
by one of the same name in ``templates_dir``. Every file is read once on the driver
(``read_templates``, the benchmark's assets); the functions here take the texts, never a path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig
from llmrec.pipelines.common.templates import fill, read_templates as _read_templates
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


Texts = Mapping[str, str]  # template file name → text


def read_templates(cfg: LRWorldConfig) -> dict[str, str]:
    """Every template file's text (the one of the same name in ``templates_dir`` if there, else
    the package's), read on the driver: on a cluster ``templates_dir`` exists only there."""
    names = sorted(p.name for p in (PACKAGE_DIR / "templates").glob("*.txt"))
    d = cfg.templates_dir
    return _read_templates(PACKAGE_DIR, {n: d / n if d and (d / n).is_file() else None for n in names}, suffix="")


def template(texts: Texts, name: str) -> str:
    return texts[name]


def option_lines(kind: str, options: list[str]) -> str:
    if kind == "hit1":
        return "\n".join(f"{k}. {o}" for k, o in enumerate(options, 1))
    return "\n".join(f"{chr(65 + k)}) {o}" for k, o in enumerate(options))


def instruction(kind: str, cot: bool, texts: Texts) -> str:
    label = "number" if kind == "hit1" else "letter"
    if cot:
        return fill(template(texts, "cot.txt"), label=label).rstrip("\n")
    what = "one candidate" if kind == "hit1" else "one option"
    return f"Answer with the {label} of {what} only.\nAnswer:"


def question_text(texts: Texts, row: dict, cot: bool = False) -> str:
    """The task prompt of one row (or of a few-shot example, which carries the same fields)."""
    domain = row.get("domain") or "item"
    hist = row.get("history") or []
    body = fill(
        template(texts, f"{TEMPLATE_OF.get(row['factor'], row['factor'])}.txt"),
        domain=domain, domains=f"{domain}s", verb=VERBS.get(domain, "interacted with"),
        history="\n".join(f"{k}. {h}" for k, h in enumerate(hist, 1)),
        target=row.get("target") or "", question=QUESTIONS.get(row["field"], ""),
        options=option_lines(row["kind"], row["options"]), instruction=instruction(row["kind"], cot, texts))
    return body.rstrip("\n")


def messages(texts: Texts, row: dict) -> list[Message]:
    """``texts``: ``read_templates(cfg)`` (a row's assets carry it)."""
    cot = row.get("variant") == "cot"
    shots = "".join(fill(template(texts, "shot.txt"), prompt=question_text(texts, s), answer=s["gold"])
                    for s in row.get("_shots") or [])
    return [Message(role="system", content=template(texts, "system.txt").strip()),
            Message(role="user", content=shots + question_text(texts, row, cot))]
