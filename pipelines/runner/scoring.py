"""`llmrec score`: recompute a task's metrics from a predictions JSONL file.

Every task's file is read by ``read_predictions`` against the task's line schema (one reader: the
same type, finiteness, allowed-value and repeated-id checks for every task, errors by file line).
Options reach the task's ``run(lines, options)`` as a dict. A task declares the options it
takes (``ScoreTask.options``); giving one it does not take is an error naming what it takes.
``model`` and ``oracle`` are always passed (None when unset), as before, and ``predictions``
(the file's path) is added so a task can report errors by file line. A task's ``option_schema`` types and
bounds its options: a value of the wrong type or out of range is refused before the file is read. A task
that ``streams`` gets the lines as an iterator, read from the file one at a time, so its memory does not
grow with the file.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.errors import ConfigError
from llmrec.pipelines.common.jsonio import iter_predictions, read_predictions
from llmrec.pipelines.registry import SCORE_TASKS

ALWAYS_PASSED = ("model", "oracle")


def parse_option_pairs(pairs: list[str]) -> dict[str, str]:
    """``["k=5", "items=x.jsonl"]`` → ``{"k": "5", "items": "x.jsonl"}`` (values stay strings)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out


CLI_FLAGS = ("model", "oracle", "items", "k")  # options `llmrec score` takes as flags of their own (--k 5)


def _flag(key: str) -> str:
    return f"--{key}" if key in CLI_FLAGS else f"--option {key}"


def score_file(task: str, path: Path, options: dict | None = None) -> dict:
    t = SCORE_TASKS.get(task)
    opts = dict(options or {})
    unknown = sorted(k for k, v in opts.items() if v is not None and k not in t.options and k not in ALWAYS_PASSED)
    if unknown:
        takes = t.describe_options() or "none"
        raise ConfigError(f"score task '{task}' takes no option(s) {unknown}; it takes: {takes}")
    if t.option_schema is not None:
        opts.update(t.checked_options({k: v for k, v in opts.items() if k in t.options and v is not None}, _flag))
    opts["predictions"] = str(path)
    if not t.streams:
        lines = read_predictions(path, t.line)
        return {"task": task, "n_lines": len(lines), "metrics": t.run(lines, opts)}
    counted = [0]

    def lines_counted():
        for line in iter_predictions(path, t.line):
            counted[0] += 1
            yield line

    metrics = t.run(lines_counted(), opts)  # a streaming task reads the file once, a line at a time
    return {"task": task, "n_lines": counted[0], "metrics": metrics}
