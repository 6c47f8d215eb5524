"""The report's plots: every subject overlaid per metric, each run's figures, and why a figure is missing.

With several subjects (a suite, or runs given together) each benchmark entry gets one figure per headline
metric with every subject (and baseline) on the same axes: value and 95% CI, in the order the entries were
run. Count metrics (``failed``, ``n_*``) are not plotted. A figure with nothing to show is left out with one
line saying why (:func:`llmrec.pipelines.common.plotting.overlay`); each run's own figures keep the reasons
their benchmark recorded (``plots/left_out.json``).
"""

from __future__ import annotations

import base64
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from llmrec import tracking
from llmrec.pipelines.common.plotting import overlay, read_left_out


@dataclass
class Figures:
    title: str
    figures: list[dict] = field(default_factory=list)  # {"name", "uri"}
    left_out: list[str] = field(default_factory=list)  # "<figure>: <why>"


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def run_figures(title: str, run) -> Figures:
    """A run's (a ``StoredRun``'s) PNG figures and the reasons its benchmark recorded for those it left out."""
    folder = run.plots_dir
    out = Figures(title)
    if folder is not None and folder.is_dir():
        out.figures = [{"name": p.name, "uri": data_uri(p)} for p in sorted(folder.glob("*.png"))]
        out.left_out = [f"{name}: {why}" for name, why in sorted(read_left_out(folder).items())]
    return out


def _number(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def overlay_series(entries, entry: str, metric: str) -> dict[str, dict[object, tuple[float, float, float]]]:
    """subject → {0: (value, ci_low, ci_high)} of ``metric`` in benchmark entry ``entry``, in the entries' order."""
    return {e.subject: {0: (_number(e.metrics.get(metric)), _number(e.metrics.get(f"{metric}_ci_low")),
                            _number(e.metrics.get(f"{metric}_ci_high")))}
            for e in entries if e.entry == entry}


def overlays(entries) -> list[Figures]:
    """One :class:`Figures` per benchmark entry (in the entries' order) with one figure per headline metric,
    every subject overlaid; [] when the entries hold fewer than two subjects (the run's figures say it all)."""
    if len({e.subject for e in entries}) < 2:
        return []
    order = list(dict.fromkeys(e.entry for e in entries))
    out = []
    with tempfile.TemporaryDirectory(prefix="llmrec-report-") as tmp:
        for entry in order:
            group = Figures(f"{entry}: every subject")
            heads = list(dict.fromkeys(h for e in entries if e.entry == entry for h in e.headline))
            for metric in heads:
                if tracking.is_count(metric):
                    continue
                name = re.sub(r"[^\w.-]+", "_", f"{entry}_{metric}") + ".png"
                path = overlay(overlay_series(entries, entry, metric), Path(tmp) / name, metric=metric,
                               title=f"{entry}: {metric} (95% CI)")
                if path is None:
                    group.left_out.append(f"{metric}: {read_left_out(Path(tmp)).get(name, 'left out')}")
                else:
                    group.figures.append({"name": f"{entry} · {metric}", "uri": data_uri(path)})
            out.append(group)
    return out
