"""JSON-lines files: read with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from llmrec.errors import DataError


def iter_jsonl(path: Path, what: str = "file", hint: str = "") -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; a missing file, bad JSON or a non-object
    line raises ``DataError`` naming the file and the line. ``what``/``hint`` word the
    missing-file message (e.g. "candidates file", "write one with …")."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found: {path}" + (f" ({hint})" if hint else ""))
    with open(path, encoding="utf-8") as fh:
        for no, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}: line {no} is not valid JSON: {e.msg}") from e
            if not isinstance(obj, dict):
                raise DataError(f"{path}: line {no} must be a JSON object, got {type(obj).__name__}")
            yield no, obj


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> list[dict]:
    """Every line of a predictions file, each holding the ``required`` keys."""
    lines = []
    for no, obj in iter_jsonl(path, "predictions file"):
        missing = [k for k in required if k not in obj]
        if missing:
            raise DataError(f"{path}: line {no} lacks required key(s) {missing}")
        lines.append(obj)
    if not lines:
        raise DataError(f"{path}: no predictions")
    return lines
