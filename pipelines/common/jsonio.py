"""JSON-lines files: read with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path

from llmrec.errors import DataError


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> list[dict]:
    if not Path(path).is_file():
        raise DataError(f"predictions file not found: {path}")
    lines = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}: line {no} is not valid JSON: {e.msg}") from e
            if not isinstance(obj, dict):
                raise DataError(f"{path}: line {no} must be a JSON object")
            missing = [k for k in required if k not in obj]
            if missing:
                raise DataError(f"{path}: line {no} lacks required key(s) {missing}")
            lines.append(obj)
    if not lines:
        raise DataError(f"{path}: no predictions")
    return lines
