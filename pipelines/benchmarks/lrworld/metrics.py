"""Prediction lines → metrics (also ``llmrec score lrworld``).

A line: ``{sample_id, measure, factor, gold, options, output, parsed}`` plus, when present,
``variant`` (base), ``run`` (0), ``base_id``, ``gold_pop`` (pop / non-pop), ``scale``.
``parsed`` is the label the run parsed; when it is null and ``output`` is not, the output is
parsed again (``parsing.parse_choice``). An unparsable answer is wrong and counts in
``missed_rate``. Accuracy = HitRate@1 for the 10-candidate factors.

Keys: ``<variant>/accuracy`` (+ ``_ci_low``/``_ci_high``, bootstrap, ``_ci_clusters``: the samples resampled;
``_chance``: the accuracy of a uniform random guess, the mean of 1/options), ``<variant>/missed_rate``,
the same under ``<variant>/measure/<measure>/``, ``<variant>/factor/<factor>/`` and
``<variant>/scale/<scale>/``; position bias over runs: ``position/<measure>/mean`` and
``/var`` (population variance of the per-run accuracies), answer-position shares
``position/<kind>/gold/<label>`` and ``/pred/<label>``; noisy profile:
``noisy/factor/<factor>/drop`` (= base − noisy accuracy on the same samples) and
``/relative_drop``; popularity of errors (paper A.9): ``popularity/nonpop_share_errors`` and
``popularity/nonpop_share_correct``.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmrec.pipelines.benchmarks.lrworld.parsing import labels_for, parse_choice
from llmrec.pipelines.common.jsonio import PredictionLine
from llmrec.pipelines.common.stats import CHANCE, mean_with_ci


class ContractLine(PredictionLine):
    """A line of ``llmrec score lrworld``: one sample in one variant and position-bias run (its
    ``sample_id`` names both: ``<base_id>|<variant>|r<run>``). The fields, in this order, are the lines a run
    writes (``predictions.jsonl``); the optional ones describe the sample for reports and are not scored."""

    unique = ("sample_id",)
    sample_id: str
    base_id: str | None = None
    measure: str
    factor: str
    scale: str | None = None
    dataset: str | None = None
    field: str | None = None
    variant: str | None = None
    run: int | None = None
    gold: str
    gold_pos: int | None = None
    gold_pop: str | None = None
    options: list[str] = Field(min_length=2)
    output: str | None
    parsed: str | None
    status: str | None = None

    @model_validator(mode="after")
    def _gold_is_a_label(self):
        labels = labels_for(len(self.options))
        if self.gold not in labels:
            raise ValueError(f"'gold' must be one of the {len(self.options)} option labels {list(labels)}, "
                             f"got {self.gold!r}")
        return self


def score_line(line: dict) -> dict:
    parsed = line.get("parsed")
    if parsed is None and line.get("output") is not None:
        parsed = parse_choice(line["output"], line["options"])
    labels = labels_for(len(line["options"]))
    pos = labels.index(parsed) + 1 if parsed in labels else None
    return {"parsed": parsed if pos else None, "correct": bool(pos) and parsed == line["gold"],
            "missed": pos is None, "pred_pos": pos}


def _block(lines: list[dict], prefix: str, **ci) -> dict[str, float]:
    out = mean_with_ci([float(x["correct"]) for x in lines], f"{prefix}accuracy", **ci)
    counts = [len(x["options"]) for x in lines if x.get("options")]
    if counts:  # the accuracy of a uniform random guess among each sample's options
        out[f"{prefix}accuracy{CHANCE}"] = float(np.mean([1.0 / k for k in counts]))
    out[f"{prefix}missed_rate"] = float(np.mean([x["missed"] for x in lines]))
    out[f"{prefix}n"] = float(len(lines))
    return out


def _groups(lines: list[dict], key) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for x in lines:
        out[key(x)].append(x)
    return dict(sorted(out.items()))


def _position(base: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for measure, group in _groups(base, lambda x: x["measure"]).items():
        runs = _groups(group, lambda x: x.get("run", 0))
        if len(runs) > 1:
            acc = [np.mean([x["correct"] for x in g]) for g in runs.values()]
            out[f"position/{measure}/mean"] = float(np.mean(acc))
            out[f"position/{measure}/var"] = float(np.var(acc))
    for kind, group in _groups(base, lambda x: "hit1" if len(x["options"]) > 4 else "mcq").items():
        labels = labels_for(len(group[0]["options"]))
        for lab in labels:
            out[f"position/{kind}/gold/{lab}"] = float(np.mean([x["gold"] == lab for x in group]))
            out[f"position/{kind}/pred/{lab}"] = float(np.mean([x["parsed"] == lab for x in group]))
    return out


def _noisy(base: list[dict], noisy: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    clean = {(x.get("base_id", x["sample_id"]), x.get("run", 0)): x for x in base}
    pairs = [(clean[k], x) for x in noisy if (k := (x.get("base_id"), x.get("run", 0))) in clean]
    for factor, group in _groups(pairs, lambda p: p[0]["factor"]).items():
        a, b = (float(np.mean([p[i]["correct"] for p in group])) for i in (0, 1))
        out[f"noisy/factor/{factor}/base_accuracy"] = a
        out[f"noisy/factor/{factor}/noisy_accuracy"] = b
        out[f"noisy/factor/{factor}/drop"] = a - b
        out[f"noisy/factor/{factor}/relative_drop"] = (a - b) / a if a > 0 else float("nan")
    return out


def _popularity(base: list[dict]) -> dict[str, float]:
    tagged = [x for x in base if x.get("gold_pop") in ("pop", "non-pop")]
    out = {}
    for name, keep in (("errors", False), ("correct", True)):
        g = [x for x in tagged if x["correct"] == keep]
        if g:
            out[f"popularity/nonpop_share_{name}"] = float(np.mean([x["gold_pop"] == "non-pop" for x in g]))
    return out


def aggregate_lines(lines: list[dict], confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
    """All metrics from scored lines (each with ``correct``/``missed``/``parsed``; see ``score_line``)."""
    ci = {"confidence": confidence, "seed": seed}
    out: dict[str, float] = {}
    by_variant = _groups(lines, lambda x: x.get("variant") or "base")
    for variant, group in by_variant.items():
        out.update(_block(group, f"{variant}/", **ci))
        for name, key in (("measure", "measure"), ("factor", "factor"), ("scale", "scale")):
            for value, g in _groups([x for x in group if x.get(key)], lambda x: x[key]).items():
                out.update(_block(g, f"{variant}/{name}/{value}/", **ci))
    base = by_variant.get("base", [])
    out.update(_position(base))
    out.update(_noisy(base, by_variant.get("noisy", [])))
    out.update(_popularity(base))
    return out


class ScoreOptions(BaseModel):
    """``llmrec score lrworld --option confidence=0.9 --option seed=1``."""

    model_config = ConfigDict(extra="forbid")
    confidence: float = Field(0.95, gt=0, lt=1, allow_inf_nan=False,
                              description="the bootstrap CI's level, a number between 0 and 1 exclusive")
    seed: int = Field(0, ge=0, description="the bootstrap's seed, an integer >= 0")


def score_predictions(lines: list[dict], options: dict) -> dict[str, float]:
    """``llmrec score lrworld``: re-score every line, then aggregate."""
    opts = ScoreOptions.model_validate({k: options[k] for k in ScoreOptions.model_fields if options.get(k) is not None})
    scored = [{**x, **score_line(x)} for x in lines]
    return aggregate_lines(scored, opts.confidence, opts.seed)
