"""MCQ vs generation across runs: pair per-(model, form, method, turns) accuracies of MCQ runs
with those of generation runs and report Pearson r (the paper reports 0.73 over six models,
five methods and twelve turn settings, each point averaged over the 20 topics)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from llmrec.errors import DataError, LlmrecError
from llmrec.rundir import RunDir

log = logging.getLogger(__name__)
CELL = "accuracy.cell."


def _run_dir(path: Path) -> RunDir:
    """The run directory given (or the one holding the metrics file given)."""
    path = Path(path)
    rd = RunDir(path if path.is_dir() else path.parent)
    if (not path.is_dir() and path.name != RunDir.METRICS) or not rd.has_metrics():
        raise DataError(f"no {RunDir.METRICS} at {path} (give a run directory or its {RunDir.METRICS})")
    return rd


def run_cells(path: Path) -> tuple[str | None, dict[tuple, float]]:
    """(task, {(model, form, method, turns): accuracy}) of one run directory."""
    rd = _run_dir(path)
    try:
        metrics = rd.metrics()
    except LlmrecError as e:
        raise DataError(str(e).replace("not readable JSON", "malformed JSON")) from e
    model, task = "unknown", None
    if rd.has_config():
        cfg = rd.config()
        eng = cfg.get("engine") or {}
        model = str(eng.get("model") or eng.get("model_path") or eng.get("type") or "unknown")
        task = (cfg.get("benchmark") or {}).get("task")
    cells = {}
    for key, value in metrics.items():
        if key.startswith(CELL) and value is not None and not (isinstance(value, float) and math.isnan(value)):
            form, method, turns = key[len(CELL):].split(".")
            cells[(model, form, method, int(turns))] = float(value)
    return task, cells


def collect(paths: list[Path], expect: str) -> dict[tuple, float]:
    out: dict[tuple, float] = {}
    for p in paths:
        task, cells = run_cells(p)
        if task is not None and task != expect:
            raise DataError(f"{p} is a '{task}' run; expected a '{expect}' run here")
        out.update(cells)
    return out


def pearson(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return math.nan
    from scipy import stats

    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return math.nan
    return float(stats.pearsonr(xs, ys)[0])


def compare(mcq_runs: list[Path], gen_runs: list[Path], plot: Path | None = None) -> dict:
    """Points present in both sets, their Pearson r, and optionally the scatter plot."""
    mcq, gen = collect(mcq_runs, "mcq"), collect(gen_runs, "gen")
    keys = sorted(set(mcq) & set(gen))
    if not keys:
        raise DataError("no (model, form, method, turns) setting is in both the MCQ and the generation runs")
    points = [{"model": k[0], "form": k[1], "method": k[2], "turns": k[3], "mcq": mcq[k], "gen": gen[k]} for k in keys]
    r = pearson([p["mcq"] for p in points], [p["gen"] for p in points])
    out = {"n": len(points), "pearson_r": r, "points": points}
    if plot is not None:
        from llmrec.pipelines.benchmarks.prefeval.plots import mcq_vs_gen

        out["plot"] = str(mcq_vs_gen(points, r, Path(plot)))
    log.info("MCQ vs generation: %d points, Pearson r = %.3f", len(points), r)
    return out
