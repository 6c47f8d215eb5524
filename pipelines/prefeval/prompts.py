"""PrefEval conversations: preference part per form, inter-turns, final MCQ question."""

from __future__ import annotations

from pathlib import Path

from pipelines.common.seeding import stable_rng
from pipelines.common.templates import fill, load_template
from pipelines.prefeval.config import PrefEvalConfig
from serving.types import Message

HERE = Path(__file__).parent
LETTERS = "ABCD"


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


def mcq_question(cfg: PrefEvalConfig, question: str, options: list[str], method: str) -> str:
    template = load_template(HERE, "mcq_question.txt", cfg.templates.mcq_question)
    reminder = load_template(HERE, "reminder.txt", cfg.templates.reminder) if method == "reminder" else ""
    opts = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return fill(template, question=question, options=opts, reminder=reminder)


def system(cfg: PrefEvalConfig) -> list[Message]:
    return [Message(role="system", content=cfg.system_prompt)] if cfg.system_prompt else []


def conversation(cfg: PrefEvalConfig, sample: dict, pref_reply: str | None) -> list[Message]:
    """Full MCQ prompt: [system] + preference turns (+ live reply) + inter-turns + question."""
    msgs = system(cfg) + [Message(**m) for m in sample["_preference"]]
    if sample["form"] == "explicit":
        msgs.append(Message(role="assistant", content=pref_reply or ""))
    msgs += [Message(**m) for m in sample["_inter"]]
    msgs.append(Message(role="user", content=mcq_question(cfg, sample["question"], sample["options"], sample["method"])))
    return msgs
