"""Run directories with transcripts, built by hand for the viewer and report tests (no engine): PrefEval MCQ records
whose calls carry request references (``llmrec.transcripts.request_ref``), their texts in the run's ``TextStore``,
``samples.parquet`` written through the benchmark's record schema."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from llmrec.pipelines.protocol import record_schema
from llmrec.pipelines.registry import get_benchmark
from llmrec.rundir import RunDir
from llmrec.transcripts import TextStore, request_ref
from llmrec.types import Message, Request, SamplingParams

SCRIPT = "<script>document.title='pwned'</script>"
IMG = '"><img src=x onerror="document.title=\'img-pwned\'">'
SYSTEM = "You are a helpful travel assistant."
OPTIONS = ["A busy downtown hotel", "A quiet countryside inn", "A shared hostel dorm", "A campsite"]


def conversation(i: int, turns: int) -> list[Message]:
    """A PrefEval-like conversation: the preference first, ``turns`` inter-turn exchanges, the question last."""
    msgs = [Message(role="system", content=SYSTEM),
            Message(role="user", content=f"PREFERENCE {i}: I strongly dislike crowded places."),
            Message(role="assistant", content="Noted: you prefer quiet places.")]
    for t in range(turns):
        msgs += [Message(role="user", content=f"Unrelated question number {t} about cooking pasta."),
                 Message(role="assistant", content=f"Unrelated answer number {t}: boil the water first.")]
    msgs.append(Message(role="user", content=f"QUESTION {i}: Where should I stay on my trip?\n"
                        + "\n".join(f"{l}. {o}" for l, o in zip("ABCD", OPTIONS))))
    return msgs


def prefeval_run(d: Path, n: int = 8, turns: int = 2, inject: bool = True, transcripts: bool = True,
                 model: str = "fake-model", kinds: dict[int, str] | None = None,
                 edits: dict[int, str] | None = None, skip: tuple[int, ...] = ()) -> Path:
    """A PrefEval MCQ run of ``n`` samples: sample 0 right, 1 wrong, 2 missed, 3 failed, then right / wrong
    alternating. ``inject``: sample 1's question and output hold HTML that must render as text. ``transcripts``
    False: a run written before transcripts (calls without request references, no text store). ``kinds``: sample
    number → its kind instead (right / wrong / missed / failed); ``edits``: sample number → a line added to its
    question (a changed prompt); ``skip``: sample numbers left out of the run."""
    rd = RunDir(d)
    rd.mkdir()
    rd.write_config(yaml.safe_dump({"benchmark": {"name": "prefeval", "task": "mcq", "topics": ["travel_restaurant"]},
                                    "engine": {"type": "fake", "model": model}, "tracking": {"enabled": False}}))
    rd.write_metrics({"accuracy": 0.5, "accuracy_ci_low": 0.2, "accuracy_ci_high": 0.8, "missed_rate": 0.1,
                      "failed": 1.0, "over_context": 0.0})
    texts: dict[str, str] = {}
    rows = []
    for i in range(n):
        if i in skip:
            continue
        kind = ["right", "wrong", "missed", "failed"][i] if i < 4 else ("right" if i % 2 == 0 else "wrong")
        kind = (kinds or {}).get(i, kind)
        msgs = conversation(i, turns)
        if i in (edits or {}):
            msgs[-1] = Message(role="user", content=msgs[-1].content + "\n" + edits[i])
        output = {"right": "<choice>B</choice>", "wrong": "<choice>A</choice>", "missed": "I cannot decide.",
                  "failed": ""}[kind]
        if inject and i == 1:
            msgs[-1] = Message(role="user", content=msgs[-1].content + "\n" + SCRIPT + IMG)
            output = f"<choice>A</choice> {SCRIPT}{IMG}"
        req = Request(messages=msgs, sampling=SamplingParams(max_tokens=16))
        result = {"text": output, "finish_reason": "stop" if kind != "failed" else "error", "prompt_tokens": 100 + i,
                  "cached_prompt_tokens": 64, "completion_tokens": 5, "latency_s": 0.25 + i / 100,
                  "error": "engine timed out" if kind == "failed" else None, "from_cache": False}
        if transcripts:
            result["request"] = request_ref(req, texts, "subject")
        rows.append({"sample_id": f"travel_restaurant/explicit/{i:04d}/t{turns:03d}/zero-shot",
                     "setting": {"task": "mcq", "form": "explicit", "turns": turns, "method": "zero-shot",
                                 "position": "start", "extra_prefs": 0, "conflict": False},
                     "status": "failed" if kind == "failed" else "ok",
                     "error": "engine timed out" if kind == "failed" else None,
                     "failed_stage": "answer" if kind == "failed" else None,
                     "outputs": {"answer": result}, "task": "mcq", "topic": "travel_restaurant", "form": "explicit",
                     "task_id": i, "question": msgs[-1].content, "preference": msgs[1].content, "options": OPTIONS,
                     "gold": "B", "turns": turns, "method": "zero-shot", "position": "start", "extra_prefs": 0,
                     "conflict": False, "output": output if kind != "failed" else None,
                     "prediction": {"right": "B", "wrong": "A"}.get(kind),
                     "missed": None if kind == "failed" else kind == "missed",
                     "correct": None if kind == "failed" else kind == "right"})
    table = record_schema(get_benchmark("prefeval")).table(rows)
    pq.write_table(table, d / RunDir.SAMPLES)
    if transcripts:
        TextStore(rd.transcripts).add(texts)
    return d


def suite_of(root: Path, runs: dict[tuple[str, str], Path]) -> Path:
    """A suite.json over existing run directories: (subject, entry) → run directory (relative to ``root``)."""
    entries = [{"subject": s, "benchmark": "prefeval", "entry": e, "kind": "llm", "run_dir": str(p.relative_to(root)),
                "headline": ["accuracy"], "mlflow_run_id": None} for (s, e), p in runs.items()]
    (root / "suite.json").write_text(json.dumps({"name": "viewer-suite", "entries": entries}))
    return root
