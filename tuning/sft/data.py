"""SFT JSONL → token ids with the loss on the target only.

Prompts are rendered by the transformers engine's ``render_prompt`` — the function the engine
uses at evaluation time — so an adapter is trained on exactly the text it is evaluated on. The
target is the completion followed by the end-of-turn/EOS token the engine stops on.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from llmrec.errors import DataError
from llmrec.serving.engines.transformers import render_prompt
from llmrec.types import Message

log = logging.getLogger(__name__)
IGNORE = -100


@dataclass
class Example:
    input_ids: list[int]
    labels: list[int]


def read_jsonl(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"SFT data file not found: {path}")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not JSON: {e}") from e
    if not rows:
        raise DataError(f"{path}: no records")
    return rows


def prompt_and_target(row: dict, tokenizer, prompt_format: str, where: str) -> tuple[str, str]:
    """(prompt text, target text) of one record (see ``SFTData`` for the accepted shapes)."""
    if isinstance(row.get("prompt"), str) and isinstance(row.get("completion"), str):
        return row["prompt"], row["completion"]
    msgs = row.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise DataError(f"{where}: a record needs 'messages' (+ 'completion') or 'prompt' + 'completion'; "
                        f"got keys {sorted(row)}")
    try:
        messages = [Message.model_validate(m) for m in msgs]
    except ValueError as e:
        raise DataError(f"{where}: bad message: {e}") from e
    if isinstance(row.get("completion"), str):
        target = row["completion"]
    elif messages[-1].role == "assistant":
        target, messages = messages[-1].content, messages[:-1]
    else:
        raise DataError(f"{where}: no target: give 'completion' or end 'messages' with an assistant turn")
    return render_prompt(tokenizer, messages, prompt_format), target


def _end_ids(tokenizer, prompt_format: str) -> list[int]:
    """What ends a turn: Gemma's ``<end_of_turn>`` when the model has it (the engine stops on it), and EOS."""
    ids = []
    if prompt_format in ("auto", "gemma"):
        eot = tokenizer.convert_tokens_to_ids("<end_of_turn>")
        if isinstance(eot, int) and eot != tokenizer.unk_token_id:
            ids.append(eot)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids[:1]


def encode(rows: list[dict], tokenizer, prompt_format: str, max_length: int, source: str,
           required: bool = True) -> list[Example]:
    """Tokenize records; prompt tokens get label -100. Over-long examples are dropped and counted
    (``required``: raise when none is left)."""
    out, dropped, end = [], 0, _end_ids(tokenizer, prompt_format)
    bos = tokenizer.bos_token_id
    for i, row in enumerate(rows, 1):
        prompt, target = prompt_and_target(row, tokenizer, prompt_format, f"{source}:{i}")
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if bos is not None and (not p or p[0] != bos):
            p = [bos] + p
        t = tokenizer(target, add_special_tokens=False)["input_ids"] + end
        if len(p) + len(t) > max_length:
            dropped += 1
            continue
        out.append(Example(p + t, [IGNORE] * len(p) + t))
    if dropped:
        log.warning("%s: dropped %d of %d examples longer than data.max_length=%d", source, dropped, len(rows),
                    max_length)
    if not out and required:
        raise DataError(f"{source}: every example is longer than data.max_length={max_length}")
    return out


def load_splits(data, tokenizer, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, valid) examples from an ``SFTData`` section."""
    import random

    rows = read_jsonl(data.train)
    if data.max_examples:
        rows = rows[: data.max_examples]
    if data.valid is not None:
        valid_rows = read_jsonl(data.valid)
    else:
        order = list(range(len(rows)))
        random.Random(seed).shuffle(order)
        n_valid = int(round(data.valid_fraction * len(rows)))
        held = set(order[:n_valid])
        valid_rows = [r for i, r in enumerate(rows) if i in held]
        rows = [r for i, r in enumerate(rows) if i not in held]
    train = encode(rows, tokenizer, data.prompt_format, data.max_length, str(data.train))
    valid = encode(valid_rows, tokenizer, data.prompt_format, data.max_length, str(data.valid or data.train),
                   required=False) if valid_rows else []
    return train, valid
