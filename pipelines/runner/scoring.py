"""`llmrec score`: recompute a task's metrics from a predictions JSONL file."""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.common.jsonio import read_jsonl
from llmrec.pipelines.registry import SCORE_TASKS


def score_file(task: str, path: Path, options: dict | None = None) -> dict:
    t = SCORE_TASKS.get(task)
    lines = read_jsonl(path, t.required)
    return {"task": task, "n_lines": len(lines), "metrics": t.run(lines, options or {})}
