"""PrefEval MCQ metrics: accuracy (unparsable = wrong) and missed rate, overall and by group;
plus the grouping helpers the generation metrics share."""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from llmrec.pipelines.common.jsonio import PredictionLine
from llmrec.pipelines.common.stats import mean_with_ci
from llmrec.pipelines.benchmarks.prefeval.parsing import parse_choice

GROUPS = ("topic", "form", "turns", "method")
STUDY_GROUPS = ("position", "extra_prefs", "conflict")


class SampleLine(PredictionLine):
    """A line of ``llmrec score prefeval-mcq`` / ``prefeval-gen``: one per sample, with its groups."""

    unique = ("sample_id",)
    sample_id: str
    topic: str | None = None
    form: str | None = None
    turns: int | None = None
    method: str | None = None


class McqLine(SampleLine):
    gold: Literal["A", "B", "C", "D"]
    output: str | None  # the raw answer (null: nothing generated, scored as missed)


def score_answer(output: str | None, gold: str) -> dict:
    pred = parse_choice(output)
    return {"prediction": pred, "missed": pred is None, "correct": pred == gold}


def status_counts(rows: list[dict]) -> dict[str, float]:
    return {
        "n_samples": float(len(rows)),
        "n_answered": float(sum(r.get("status", "ok") == "ok" for r in rows)),
        "failed": float(sum(r.get("status") == "failed" for r in rows)),
        "over_context": float(sum(r.get("status") == "over_context" for r in rows)),
        "truncated": float(sum(bool(r.get("dropped_pairs")) for r in rows)),
    }


def group_names(rows: list[dict], groups: tuple[str, ...] = GROUPS) -> tuple[str, ...]:
    """The fixed groups plus the study dimensions that vary in these rows."""
    varied = tuple(g for g in STUDY_GROUPS if len({str(r.get(g)) for r in rows if g in r}) > 1)
    return tuple(groups) + varied


def rates_by(rows: list[dict], fields: tuple[str, ...], groups: tuple[str, ...]) -> dict[str, float]:
    """``{field}.{group}.{value}`` = mean of the boolean ``field`` within each group value, plus
    ``{field}.cell.{form}.{method}.{turns}`` (the unit of the MCQ-vs-generation comparison)."""
    out: dict[str, float] = {}
    for g in groups:
        buckets: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            if g in r:
                buckets[str(r[g])].append(r)
        for key, rs in sorted(buckets.items()):
            for f in fields:
                out[f"{f}.{g}.{key}"] = sum(bool(r[f]) for r in rs) / len(rs)
    cells: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if all(k in r for k in ("form", "method", "turns")):
            cells[f"{r['form']}.{r['method']}.{r['turns']}"].append(r)
    for key, rs in sorted(cells.items()):
        out[f"{fields[0]}.cell.{key}"] = sum(bool(r[fields[0]]) for r in rs) / len(rs)
    return out


def token_stats(rows: list[dict]) -> dict[str, float]:
    tokens = [r["prompt_tokens"] for r in rows if r.get("prompt_tokens") is not None]
    if not tokens:
        return {}
    return {"prompt_tokens_mean": sum(tokens) / len(tokens), "prompt_tokens_max": float(max(tokens))}


def rag_stats(rows: list[dict]) -> dict[str, float]:
    hits = [bool(r["rag_pref_hit"]) for r in rows if r.get("rag_pref_hit") is not None]
    return {"rag_pref_recall": sum(hits) / len(hits)} if hits else {}


def mcq_metrics(rows: list[dict], groups: tuple[str, ...] = GROUPS) -> dict[str, float]:
    """rows: dicts with status, correct, missed and the group fields.

    Accuracy and missed_rate are over answered samples (status ok); failed and
    over-context samples are counted separately and never silently dropped.
    """
    answered = [r for r in rows if r.get("status", "ok") == "ok"]
    out = status_counts(rows)
    if not answered:
        out.update(accuracy=float("nan"), missed_rate=float("nan"))
        return out
    out.update(mean_with_ci([float(r["correct"]) for r in answered], "accuracy"))
    out["missed_rate"] = sum(bool(r["missed"]) for r in answered) / len(answered)
    out.update(token_stats(answered))
    out.update(rag_stats(answered))
    out.update(rates_by(answered, ("correct",), group_names(answered, groups)))
    return {_rename(k): v for k, v in out.items()}


def _rename(key: str) -> str:
    """Per-group keys read ``accuracy.<group>.<value>`` (the row field is ``correct``)."""
    return "accuracy" + key[len("correct"):] if key.startswith("correct.") else key


def score_predictions(lines: list[dict], options: dict | None = None) -> dict[str, float]:
    """`llmrec score prefeval-mcq`: lines carry sample_id, gold (A-D), output (raw text)."""
    rows = [dict(score_answer(line["output"], line["gold"]), status="ok",
                 **{g: line[g] for g in GROUPS if g in line}) for line in lines]
    return mcq_metrics(rows)
