"""PrefEval MCQ metrics: accuracy (unparsable = wrong) and missed rate, overall and by group."""

from __future__ import annotations

from collections import defaultdict

from pipelines.common.stats import mean_with_ci
from pipelines.prefeval.parsing import parse_choice

GROUPS = ("topic", "form", "turns", "method")


def score_answer(output: str | None, gold: str) -> dict:
    pred = parse_choice(output)
    return {"prediction": pred, "missed": pred is None, "correct": pred == gold}


def mcq_metrics(rows: list[dict], groups: tuple[str, ...] = GROUPS) -> dict[str, float]:
    """rows: dicts with status, correct, missed and the group fields.

    Accuracy and missed_rate are over answered samples (status ok); failed and
    over-context samples are counted separately and never silently dropped.
    """
    answered = [r for r in rows if r.get("status", "ok") == "ok"]
    out: dict[str, float] = {
        "n_samples": float(len(rows)),
        "n_answered": float(len(answered)),
        "failed": float(sum(r.get("status") == "failed" for r in rows)),
        "over_context": float(sum(r.get("status") == "over_context" for r in rows)),
    }
    if not answered:
        out.update(accuracy=float("nan"), missed_rate=float("nan"))
        return out
    out.update(mean_with_ci([float(r["correct"]) for r in answered], "accuracy"))
    out["missed_rate"] = sum(bool(r["missed"]) for r in answered) / len(answered)
    tokens = [r["prompt_tokens"] for r in answered if r.get("prompt_tokens") is not None]
    if tokens:
        out["prompt_tokens_mean"] = sum(tokens) / len(tokens)
        out["prompt_tokens_max"] = float(max(tokens))
    for g in groups:
        buckets: dict[str, list[dict]] = defaultdict(list)
        for r in answered:
            if g in r:
                buckets[str(r[g])].append(r)
        if len(buckets) < 1:
            continue
        for key, rs in sorted(buckets.items()):
            out[f"accuracy.{g}.{key}"] = sum(bool(r["correct"]) for r in rs) / len(rs)
    return out


def score_predictions(lines: list[dict], options: dict | None = None) -> dict[str, float]:
    """`llmrec score prefeval-mcq`: lines carry sample_id, gold (A-D), output (raw text)."""
    rows = [dict(score_answer(line["output"], line["gold"]), status="ok",
                 **{g: line[g] for g in GROUPS if g in line}) for line in lines]
    return mcq_metrics(rows)
