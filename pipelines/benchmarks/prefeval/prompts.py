"""PrefEval prompt texts: the preference turns per form, options, and the final user message
of each task × method. Texts come from template files (project defaults in templates/,
any file via ``benchmark.templates.<name>``)."""

from __future__ import annotations

import re
from pathlib import Path

from llmrec.pipelines.common.seeding import stable_rng
from llmrec.pipelines.common.templates import load_template
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.types import Message

HERE = Path(__file__).parent
LETTERS = "ABCD"


def template(cfg: PrefEvalConfig, name: str) -> str:
    return load_template(HERE, f"{name}.txt", getattr(cfg.templates, name))


def fill_once(text: str, **values: str) -> str:
    """Replace ``{key}`` placeholders in one pass: text inserted for one placeholder is never
    scanned for another (retrieved chat text may contain ``{options}``)."""
    if not values:
        return text
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pattern.sub(lambda m: values[m.group(0)[1:-1]], text)


def preference_messages(form: str, rec: dict) -> list[dict]:
    """The turns that state or reveal the preference (explicit: just the user statement;
    the model's own reply is generated live and inserted after it)."""
    if form == "explicit":
        return [{"role": "user", "content": rec["preference"]}]
    conv = rec["conversation"]
    if form == "choice":
        return [
            {"role": "user", "content": conv["query"]},
            {"role": "assistant", "content": conv["assistant_options"]},
            {"role": "user", "content": conv["user_selection"]},
            {"role": "assistant", "content": conv["assistant_acknowledgment"]},
        ]
    if form == "persona":
        out = []
        for key in sorted(conv, key=int):
            out += [{"role": "user", "content": conv[key]["user"]},
                    {"role": "assistant", "content": conv[key]["assistant"]}]
        return out
    raise ValueError(f"unknown form {form!r}")


def shuffle_options(options: list[str], seed: int, topic: str, task_id: int) -> tuple[list[str], str]:
    """Shuffle the 4 options (index 0 is correct) with a per-pair stable seed; return (options, gold)."""
    order = list(range(len(options)))
    stable_rng(seed, topic, task_id).shuffle(order)
    shuffled = [options[i] for i in order]
    return shuffled, LETTERS[order.index(0)]


def system(cfg: PrefEvalConfig) -> list[Message]:
    return [Message(role="system", content=cfg.system_prompt)] if cfg.system_prompt else []


def _reminder(cfg: PrefEvalConfig, method: str) -> str:
    return template(cfg, "reminder") if method == "reminder" else ""


def mcq_question(cfg: PrefEvalConfig, question: str, options: list[str], method: str, prefix: str = "") -> str:
    """The MCQ user message: [CoT or RAG prefix] + question [+ reminder] + the options block."""
    opts = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return fill_once(template(cfg, "mcq_question"), question=prefix + question, options=opts,
                     reminder=_reminder(cfg, method))


def gen_question(cfg: PrefEvalConfig, question: str, method: str, prefix: str = "") -> str:
    """The generation user message: [CoT or RAG prefix] + question [+ reminder] + word limit."""
    return fill_once(template(cfg, "gen_question"), question=prefix + question, reminder=_reminder(cfg, method),
                     word_limit=str(cfg.word_limit))


def rag_prefix(cfg: PrefEvalConfig, exchanges: list[tuple[str, str]]) -> str:
    """The retrieved-context prefix; ``exchanges`` are (role, content), most similar first."""
    lines = "\n".join(f"exchange {i}. {role.capitalize()}: {content}" for i, (role, content) in enumerate(exchanges, 1))
    return fill_once(template(cfg, "rag"), k=str(len(exchanges)), exchanges=lines)


def critique_request(cfg: PrefEvalConfig) -> str:
    return template(cfg, "critique_mcq" if cfg.task == "mcq" else "critique")


def revision_request(cfg: PrefEvalConfig, question: str, options: list[str] | None) -> str:
    """gen: the revision template with {question}; mcq: the revision sentence + the options block."""
    if cfg.task == "mcq":
        return mcq_question(cfg, template(cfg, "revision_mcq"), options or [], "zero-shot")
    return fill_once(template(cfg, "revision"), question=question)
