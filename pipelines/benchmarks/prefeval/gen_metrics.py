"""PrefEval generation metrics: accuracy and the four error-type rates, overall and by group,
and the judge failure rate; plus the ``prefeval-gen`` score task."""

from __future__ import annotations

import math
from typing import Iterable

from llmrec.pipelines.common.stats import mean_with_ci
from llmrec.pipelines.benchmarks.prefeval.judge import CHECKS, ERROR_TYPES, derive
from llmrec.pipelines.benchmarks.prefeval.metrics import (GROUPS, SampleLine, group_names, rag_stats, rates_by,
                                                         status_counts, token_stats)

CHECK_RATES = ("acknowledged", "violated", "hallucinated")


class GenLine(SampleLine):
    """The four raw judge outputs of a sample (null: the judge gave no text)."""

    acknowledge: str | None
    violate: str | None
    hallucinate: str | None
    helpful: str | None


def gen_metrics(rows: list[dict], mode: str = "reference", groups: tuple[str, ...] = GROUPS) -> dict[str, float]:
    """rows: samples with status and (when judged) the fields of ``judge.derive``.

    reference mode: accuracy and rates over every judged sample; strict mode: over the judged
    samples that are not ``judge_failed``. ``judge_failed`` is the strict criterion's count in
    both modes; ``judge_failure_rate`` its share of judged samples.
    """
    out = status_counts(rows)
    answered = [r for r in rows if r.get("status", "ok") == "ok"]
    out.update(token_stats(answered))
    out.update(rag_stats(answered))
    judged = [r for r in answered if "judge_failed" in r]
    out["n_judged"] = float(len(judged))
    out["judge_failed"] = float(sum(bool(r["judge_failed"]) for r in judged))
    out["judge_failure_rate"] = out["judge_failed"] / len(judged) if judged else math.nan
    scored = judged if mode == "reference" else [r for r in judged if not r["judge_failed"]]
    out["n_scored"] = float(len(scored))
    if not scored:
        out.update({"accuracy": math.nan, **{e: math.nan for e in ERROR_TYPES}})
        return out
    out.update(mean_with_ci([float(bool(r["correct"])) for r in scored], "accuracy"))
    for f in ERROR_TYPES + CHECK_RATES:
        out[f] = sum(bool(r[f]) for r in scored) / len(scored)
    by = rates_by(scored, ("correct",) + ERROR_TYPES, group_names(scored, groups))
    out.update({("accuracy" + k[len("correct"):]) if k.startswith("correct.") else k: v for k, v in by.items()})
    return out


def score_predictions(lines: Iterable[dict], options: dict | None = None) -> dict[str, float]:
    """`llmrec score prefeval-gen`: lines carry sample_id and the four raw judge outputs
    (acknowledge, violate, hallucinate, helpful). Reference semantics; ``judge_failed`` counts
    the samples the strict mode would set aside (``options["judge_mode"]="strict"`` applies it)."""
    mode = (options or {}).get("judge_mode") or "reference"
    rows = []
    for line in lines:
        raw = {c: "" if line.get(c) is None else str(line[c]) for c in CHECKS}
        rows.append({"status": "ok", **{g: line[g] for g in GROUPS if g in line}, **derive(raw, mode)})
    return gen_metrics(rows, mode)
