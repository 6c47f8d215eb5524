"""Read the PrefEval files exactly as the PrefEval repository publishes them."""

from __future__ import annotations

import json
from pathlib import Path

from llmrec.errors import DataError, read_utf8

ROOT = "prefeval"
FORM_DIRS = {
    "explicit": "benchmark_dataset/explicit_preference",
    "choice": "benchmark_dataset/implicit_preference/choice-based",
    "persona": "benchmark_dataset/implicit_preference/persona-driven",
    "mcq": "benchmark_dataset/mcq_options",
}
INTER_TURNS = "benchmark_dataset/filtered_inter_turns.json"


def _load_json(path: Path) -> object:
    if path.is_dir():
        raise DataError(f"PrefEval file {path} is a directory, not a JSON file: remove or rename it, then run "
                        "`llmrec data fetch prefeval` (or point LLMREC_DATA_DIR at a data directory holding the file)")
    if not path.is_file():
        raise DataError(f"PrefEval file missing: {path}. Run `llmrec data fetch prefeval` or set LLMREC_DATA_DIR.")
    try:
        return json.loads(read_utf8(path))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from e


def _records(path: Path, required: tuple[str, ...]) -> list[dict]:
    data = _load_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    for i, rec in enumerate(data):
        missing = [k for k in required if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise DataError(f"{path}: record {i} lacks {missing}")
    return data


REQUIRED = {
    "explicit": ("preference", "question"),
    "choice": ("preference", "question", "conversation"),
    "persona": ("preference", "question", "conversation"),
    "mcq": ("preference", "question", "classification_task_options"),
}


def load_topic(data_dir: Path, form: str, topic: str) -> tuple[dict, ...]:
    path = Path(data_dir) / ROOT / FORM_DIRS[form] / f"{topic}.json"
    recs = _records(path, REQUIRED[form])
    if form == "mcq":
        for i, r in enumerate(recs):
            if len(r["classification_task_options"]) != 4:
                raise DataError(f"{path}: record {i} has {len(r['classification_task_options'])} options, expected 4")
    return tuple(recs)


def load_inter_turn_chats(data_dir: Path) -> tuple[tuple[dict, ...], ...]:
    """The inter-turn chats in file order, each a tuple of {role, content} messages."""
    path = Path(data_dir) / ROOT / INTER_TURNS
    chats = _load_json(path)
    if not isinstance(chats, list):
        raise DataError(f"{path}: expected a JSON list of chats")
    out = []
    for i, chat in enumerate(chats):
        conv = chat.get("conversation") if isinstance(chat, dict) else None
        if not isinstance(conv, list):
            raise DataError(f"{path}: chat {i} has no 'conversation' list")
        msgs = []
        for j, m in enumerate(conv):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or "content" not in m:
                raise DataError(f"{path}: chat {i} message {j} needs role user/assistant and content")
            msgs.append({"role": m["role"], "content": m["content"]})
        out.append(tuple(msgs))
    return tuple(out)


def load_inter_turn_messages(data_dir: Path) -> tuple[dict, ...]:
    """All inter-turn chats' messages concatenated in file order (632 messages = 316 turns)."""
    return tuple(m for chat in load_inter_turn_chats(Path(data_dir)) for m in chat)


def inter_turns(data_dir: Path, n_turns: int) -> list[dict]:
    """The first 2·N messages, as the reference builds them (must end with the assistant)."""
    msgs = load_inter_turn_messages(Path(data_dir))
    if 2 * n_turns > len(msgs):
        raise DataError(f"{n_turns} inter-turns requested; the file holds {len(msgs) // 2}")
    out = list(msgs[: 2 * n_turns])
    if out and out[-1]["role"] != "assistant":
        raise DataError(f"inter-turn message {2 * n_turns - 1} is from {out[-1]['role']}, expected assistant")
    return out


JUDGE_FILES = {
    "acknowledge": "error_type/check_acknowledge.txt",
    "violate": "error_type/check_violation.txt",
    "hallucinate": "error_type/check_hallucination.txt",
    "helpful": "error_type/check_helpful.txt",
}


def judge_prompt(data_dir: Path, check: str, override: Path | None = None) -> str:
    """A judge prompt: ``override`` if given, else the reference's file in the data directory."""
    path = Path(override) if override is not None else Path(data_dir) / ROOT / JUDGE_FILES[check]
    if path.is_dir():
        raise DataError(f"PrefEval judge prompt {path} is a directory, not a text file: remove or rename it, then "
                        "run `llmrec data fetch prefeval`" + (f" (or point benchmark.templates.judge_{check} at a "
                                                               "file)" if override is None else ""))
    if not path.is_file():
        raise DataError(f"PrefEval judge prompt missing: {path}. Run `llmrec data fetch prefeval` or set "
                        f"LLMREC_DATA_DIR (or point benchmark.templates.judge_{check} at a file).")
    return read_utf8(path)


def assets(cfg, data_dir: Path) -> dict:
    """What stages share, read here on the driver (workers never open data or template files): the
    inter-turn messages, every prompt template's text (``benchmark.templates.*`` overrides
    included), and the four judge prompts when the judge runs."""
    from llmrec.pipelines.benchmarks.prefeval.prompts import read_templates

    out: dict = {"inter_turn_messages": list(load_inter_turn_messages(Path(data_dir))),
                 "templates": read_templates(cfg)}
    if cfg.task == "gen" and cfg.evaluate:
        out["judge_prompts"] = {c: judge_prompt(Path(data_dir), c, getattr(cfg.templates, f"judge_{c}"))
                                for c in JUDGE_FILES}
    return out


def load_conflicting(path: Path) -> dict[tuple[str, int], str]:
    """Conflicting preferences: a JSON list, or JSON lines, of
    ``{"topic": str, "task_id": int, "conflicting_preference": str}`` → {(topic, task_id): text}."""
    path = Path(path)
    text = read_utf8(path) if path.is_file() else None
    if text is None:
        raise DataError(f"conflicting-preference file not found: {path}")
    try:
        stripped = text.lstrip()
        recs = json.loads(text) if stripped.startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: malformed JSON at line {e.lineno}: {e.msg}") from e
    out: dict[tuple[str, int], str] = {}
    for i, r in enumerate(recs):
        ok = isinstance(r, dict) and isinstance(r.get("topic"), str) and isinstance(r.get("task_id"), int) \
            and isinstance(r.get("conflicting_preference"), str)
        if not ok:
            raise DataError(f"{path}: record {i} needs topic (str), task_id (int) and conflicting_preference (str)")
        out[(r["topic"], r["task_id"])] = r["conflicting_preference"]
    return out
