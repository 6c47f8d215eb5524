"""PrefEval MCQ metrics: accuracy (unparsable = wrong) and missed rate, overall and by group;
plus the grouping helpers the generation metrics share."""

from __future__ import annotations

from array import array
from collections import defaultdict
from typing import Iterable, Literal

import numpy as np

from llmrec.pipelines.common.jsonio import PredictionLine
from llmrec.pipelines.common.stats import CHANCE, mean_with_ci
from llmrec.pipelines.benchmarks.prefeval.parsing import parse_choice

GROUPS = ("topic", "form", "turns", "method")
N_OPTIONS = 4  # every MCQ question has four options (data.py refuses any other count)
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


class McqTally:
    """``mcq_metrics`` one row at a time: counts per status, group value and cell, and one byte per answered
    row for the accuracy's bootstrap interval, so a predictions file of any length is scored in flat memory."""

    def __init__(self, groups: tuple[str, ...] = GROUPS):
        self.groups = groups
        self.counts = dict.fromkeys(("n_samples", "n_answered", "failed", "over_context", "truncated"), 0)
        self.correct = array("B")  # answered rows, in order
        self.missed = 0
        self.tokens = [0, 0, 0]  # answered rows with prompt_tokens: count, sum, max
        self.rag = [0, 0]  # answered rows with rag_pref_hit: count, hits
        self.by: dict[str, dict[str, list[int]]] = {g: defaultdict(lambda: [0, 0]) for g in groups + STUDY_GROUPS}
        self.cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    def add(self, r: dict) -> None:
        c, status = self.counts, r.get("status", "ok")
        c["n_samples"] += 1
        c["n_answered"] += status == "ok"
        c["failed"] += status == "failed"
        c["over_context"] += status == "over_context"
        c["truncated"] += bool(r.get("dropped_pairs"))
        if status != "ok":
            return
        ok = bool(r["correct"])
        self.correct.append(ok)
        self.missed += bool(r["missed"])
        if r.get("prompt_tokens") is not None:
            t = self.tokens
            t[0], t[1], t[2] = t[0] + 1, t[1] + r["prompt_tokens"], max(t[2], r["prompt_tokens"])
        if r.get("rag_pref_hit") is not None:
            self.rag[0] += 1
            self.rag[1] += bool(r["rag_pref_hit"])
        for g, buckets in self.by.items():
            if g in r:
                b = buckets[str(r[g])]
                b[0], b[1] = b[0] + 1, b[1] + ok
        if all(k in r for k in ("form", "method", "turns")):
            cell = self.cells[f"{r['form']}.{r['method']}.{r['turns']}"]
            cell[0], cell[1] = cell[0] + 1, cell[1] + ok

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {k: float(v) for k, v in self.counts.items()}
        n = len(self.correct)
        if not n:
            out.update(accuracy=float("nan"), missed_rate=float("nan"))
            return out
        out.update(mean_with_ci(np.frombuffer(self.correct, dtype=np.uint8).astype(float), "accuracy"))
        out[f"accuracy{CHANCE}"] = 1.0 / N_OPTIONS  # a uniform random guess among the options
        out["missed_rate"] = self.missed / n
        if self.tokens[0]:
            out.update(prompt_tokens_mean=self.tokens[1] / self.tokens[0], prompt_tokens_max=float(self.tokens[2]))
        if self.rag[0]:
            out["rag_pref_recall"] = self.rag[1] / self.rag[0]
        varied = tuple(g for g in STUDY_GROUPS if len(self.by[g]) > 1)
        for g in self.groups + varied:
            for key, (total, right) in sorted(self.by[g].items()):
                out[f"accuracy.{g}.{key}"] = right / total
        for key, (total, right) in sorted(self.cells.items()):
            out[f"accuracy.cell.{key}"] = right / total
        return out


def mcq_metrics(rows: Iterable[dict], groups: tuple[str, ...] = GROUPS) -> dict[str, float]:
    """rows: dicts with status, correct, missed and the group fields (any iterable: read once).

    Accuracy and missed_rate are over answered samples (status ok); failed and
    over-context samples are counted separately and never silently dropped.
    """
    tally = McqTally(groups)
    for r in rows:
        tally.add(r)
    return tally.metrics()


def score_predictions(lines: Iterable[dict], options: dict | None = None) -> dict[str, float]:
    """`llmrec score prefeval-mcq`: lines carry sample_id, gold (A-D), output (raw text); read once, one at a
    time (the task streams: memory does not grow with the file)."""
    return mcq_metrics(dict(score_answer(line["output"], line["gold"]), status="ok",
                            **{g: line[g] for g in GROUPS if g in line}) for line in lines)
