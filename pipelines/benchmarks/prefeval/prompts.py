"""PrefEval prompt texts: the preference turns per form, options, and the final user message
of each task × method. Texts come from template files (project defaults in templates/,
any file via ``benchmark.templates.<name>``), read once on the driver (``read_templates``, part
of the benchmark's assets); the functions here take those texts (``texts``), never a path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from llmrec.pipelines.common.seeding import stable_rng
from llmrec.pipelines.common.templates import read_templates as _read_templates
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.protocol import sample_assets
from llmrec.types import Message

HERE = Path(__file__).parent
LETTERS = "ABCD"
# the templates with a packaged default (the judge_* prompts default to the data directory: data.assets)
TEMPLATE_NAMES = ("mcq_question", "reminder", "gen_question", "cot", "rag", "critique", "revision",
                  "critique_mcq", "revision_mcq", "judge_system")
Texts = Mapping[str, str]  # template name → text


def read_templates(cfg: PrefEvalConfig) -> dict[str, str]:
    """Every template's text (``benchmark.templates.<name>`` or the packaged default), on the driver."""
    return _read_templates(HERE, {n: getattr(cfg.templates, n) for n in TEMPLATE_NAMES})


def texts(sample: dict) -> Texts:
    """The template texts the runner attached to a sample (the benchmark's assets)."""
    return sample_assets(sample)["templates"]


def template(texts: Texts, name: str) -> str:
    return texts[name]


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


def _reminder(texts: Texts, method: str) -> str:
    return template(texts, "reminder") if method == "reminder" else ""


def mcq_question(texts: Texts, question: str, options: list[str], method: str, prefix: str = "") -> str:
    """The MCQ user message: [CoT or RAG prefix] + question [+ reminder] + the options block."""
    opts = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return fill_once(template(texts, "mcq_question"), question=prefix + question, options=opts,
                     reminder=_reminder(texts, method))


def gen_question(cfg: PrefEvalConfig, texts: Texts, question: str, method: str, prefix: str = "") -> str:
    """The generation user message: [CoT or RAG prefix] + question [+ reminder] + word limit."""
    return fill_once(template(texts, "gen_question"), question=prefix + question,
                     reminder=_reminder(texts, method), word_limit=str(cfg.word_limit))


def rag_prefix(texts: Texts, exchanges: list[tuple[str, str]]) -> str:
    """The retrieved-context prefix; ``exchanges`` are (role, content), most similar first."""
    lines = "\n".join(f"exchange {i}. {role.capitalize()}: {content}" for i, (role, content) in enumerate(exchanges, 1))
    return fill_once(template(texts, "rag"), k=str(len(exchanges)), exchanges=lines)


def critique_request(cfg: PrefEvalConfig, texts: Texts) -> str:
    return template(texts, "critique_mcq" if cfg.task == "mcq" else "critique")


def revision_request(cfg: PrefEvalConfig, texts: Texts, question: str, options: list[str] | None) -> str:
    """gen: the revision template with {question}; mcq: the revision sentence + the options block."""
    if cfg.task == "mcq":
        return mcq_question(texts, template(texts, "revision_mcq"), options or [], "zero-shot")
    return fill_once(template(texts, "revision"), question=question)
