"""Run and suite directories as `llmrec run` and `llmrec suite` write them, built by hand for the leaderboard and
report tests (no engine): metrics.json, resolved.yaml, samples.parquet (nested values as JSON text), plots/*.png;
suite.json in the layout issue 21 fixes; a comparison.json as `llmrec compare` writes it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import yaml

INJECTION = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
LONG_PREFERENCE = "I never eat meat. " * 5000  # 90,000 characters: a long-context prompt


def png_bytes() -> bytes:
    """A small red PNG."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), "red").save(buf, "PNG")
    return buf.getvalue()


def write_run(d: Path, benchmark: str, model: str, metrics: dict, rows: list[dict] | None = None,
              tracking: dict | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "metrics.json").write_text(json.dumps(metrics))
    cfg = {"benchmark": {"name": benchmark}, "engine": {"type": "fake", "model": model},
           "tracking": tracking or {"enabled": False}}
    (d / "resolved.yaml").write_text(yaml.safe_dump(cfg))
    if rows is not None:
        flat = pd.DataFrame([{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()}
                             for r in rows])
        flat.to_parquet(d / "samples.parquet", index=False)
        (d / "plots").mkdir(exist_ok=True)
        (d / "plots" / "accuracy_by_turns.png").write_bytes(png_bytes())
    return d


def prefeval_rows(n: int = 6) -> list[dict]:
    """PrefEval MCQ rows: sample 1 answers with an HTML injection, sample 2 failed, sample 3 has a long prompt."""
    rows = []
    for i in range(n):
        turns = 2 if i % 2 == 0 else 10
        rows.append({"sample_id": f"travel/explicit/{i:04d}/t{turns:03d}/zero-shot", "task": "mcq", "topic": "travel",
                     "task_id": i,
                     "form": "explicit", "turns": turns, "method": "zero-shot", "position": "end", "extra_prefs": 0,
                     "conflict": False, "preference": LONG_PREFERENCE if i == 3 else f"I avoid crowds ({i})",
                     "question": "Where should I stay?", "options": ["Busy hotel", "Quiet inn", "Hostel", "Camp"],
                     "gold": "B", "output": INJECTION if i == 1 else "<choice>B</choice>",
                     "correct": i != 1, "missed": i == 1, "status": "failed" if i == 2 else "ok",
                     "error": "engine timed out" if i == 2 else None,
                     "outputs": {"answer": {"text": "<choice>B</choice>", "prompt_tokens": 40}}})
    return rows


def perrecbench_rows() -> list[dict]:
    return [{"sample_id": "easy-1/point", "level": "easy", "mode": "point", "user_ids": ["u1", "u2"], "item_id": "i9",
             "prediction": [4, 3], "relative_ratings": [0.5, -0.5], "ptc": 1.0, "exact_match": 1.0, "missed": False,
             "status": "ok", "error": None}]


def suite_dir(root: Path, comparison: bool = True, tracking: dict | None = None) -> Path:
    """A suite of two LLM subjects on PrefEval and PerRecBench, and PerRecBench's user-average baseline
    (metrics.json only, no CI, no samples); with a comparison under comparisons/. ``tracking``: the runs'
    tracking section (default: off)."""
    s = root / "demo_suite"
    entries = []
    for subject, acc in (("gemma-a", 0.41666666666666663), ("gemma-b", 0.5833333333333334)):
        write_run(s / subject / "prefeval_mcq", "prefeval", subject,
                  {"accuracy": acc, "accuracy_ci_low": acc - 0.2, "accuracy_ci_high": acc + 0.2, "missed_rate": 0.1,
                   "failed": 1.0, "over_context": 0.0}, prefeval_rows(), tracking)
        write_run(s / subject / "perrecbench", "perrecbench", subject,
                  {"ptc": 0.12345, "ptc_ci_low": 0.01, "ptc_ci_high": 0.2, "ptc_rank": 0.2, "exact_match": 0.3,
                   "failed": 0.0}, perrecbench_rows(), tracking)
        entries += [{"subject": subject, "benchmark": "prefeval", "entry": "prefeval_mcq", "kind": "llm",
                     "run_dir": f"{subject}/prefeval_mcq", "headline": ["accuracy", "missed_rate", "failed"],
                     "mlflow_run_id": None},
                    {"subject": subject, "benchmark": "perrecbench", "entry": "perrecbench", "kind": "llm",
                     "run_dir": str(s / subject / "perrecbench"), "headline": ["ptc", "exact_match"],
                     "mlflow_run_id": None}]
    base = s / "user-average" / "perrecbench"
    base.mkdir(parents=True)
    (base / "metrics.json").write_text(json.dumps({"ptc": 0.05, "exact_match": 0.1}))
    entries.insert(0, {"subject": "user-average", "benchmark": "perrecbench", "entry": "perrecbench",
                       "kind": "baseline", "run_dir": "user-average/perrecbench"})  # headline: the benchmark's
    (s / "suite.json").write_text(json.dumps({"name": "demo_suite", "subjects": ["gemma-a", "gemma-b"],
                                              "entries": entries}))
    if comparison:
        c = s / "comparisons" / "gemma-a--vs--gemma-b"
        c.mkdir(parents=True)
        runs = [{"label": f"{x}/prefeval_mcq", "run_dir": str(s / x / "prefeval_mcq"), "group": "prefeval_mcq"}
                for x in ("gemma-a", "gemma-b")]
        (c / "comparison.json").write_text(json.dumps({
            "runs": runs, "protocol_diff": {"allowed": False, "differences": []},
            "dropped": [{"a": "gemma-a/prefeval_mcq", "b": "gemma-b/prefeval_mcq", "failed_in_a": 1, "failed_in_b": 0,
                         "no_outcome": {}}],
            "rows": [{"group": "prefeval_mcq", "a": "gemma-a/prefeval_mcq", "b": "gemma-b/prefeval_mcq",
                      "metric": "accuracy", "setting": "turns=10", "statistic": "mean", "n_pairs": 40,
                      "n_clusters": 10, "value_a": 0.4, "value_b": 0.55, "diff": 0.15, "ci_low": 0.02,
                      "ci_high": 0.28, "p": 0.0000123, "p_holm": 0.0000246, "test": "mcnemar-exact"}]}))
    return s
