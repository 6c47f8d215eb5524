"""Matplotlib for benchmark plots: a headless backend, figures saved and closed, and the rule for leaving one out.

A figure that would show nothing to compare — no data, or a line over a single x value (one point on an axis
from 1.9 to 2.1) — is not drawn: :func:`left_out` logs one line saying why (once per figure and reason) and
records it in the plots folder's ``RunDir.PLOTS_LEFT_OUT`` file, which the report shows where the plots are listed.
:func:`overlay` draws one metric for several subjects on one axes (a suite report: every subject overlaid).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from llmrec.rundir import RunDir

log = logging.getLogger(__name__)
_logged: set[tuple[str, str]] = set()

Point = tuple[float, float, float]  # value, CI low, CI high (NaN: none)


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display on workers or CI), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, dpi: int = 100) -> Path:
    """Write ``fig`` to ``path`` (folders created), close it, return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def finite(v) -> bool:
    try:
        return v is not None and not isinstance(v, bool) and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def ci_bars(ax, models: Mapping[str, Mapping], groups: Sequence[str], key) -> float:
    """Grouped bars: in each of ``groups``, one bar per model (sorted by label) of its value ``key(group)`` with the
    95% CI its metrics hold (``<key>_ci_low`` / ``_ci_high``) as error bars. Returns the width of one bar."""
    import numpy as np

    width = 0.8 / max(1, len(models))
    for k, (label, m) in enumerate(sorted(models.items())):
        values = [m.get(key(g), np.nan) for g in groups]
        lo = [v - m.get(f"{key(g)}_ci_low", v) for g, v in zip(groups, values)]
        hi = [m.get(f"{key(g)}_ci_high", v) - v for g, v in zip(groups, values)]
        ax.bar(np.arange(len(groups)) + k * width, values, width, yerr=[lo, hi], capsize=2, label=label)
    return width


def why_left_out(series: Mapping[str, Mapping | Sequence], x_name: str = "x", line: bool = True) -> str | None:
    """Why a figure of ``series`` (label → {x: y} or a list of y values) should not be drawn, else None:
    no finite value at all, or (``line``: a line plot) every series over one and the same single x value."""
    xs: set = set()
    points = 0
    for values in series.values():
        items = values.items() if isinstance(values, Mapping) else enumerate(values)
        for x, y in items:
            if finite(y[0] if isinstance(y, tuple) else y):
                xs.add(x)
                points += 1
    if points == 0:
        return "no data"
    if line and len(xs) == 1:
        return f"one {x_name} value ({next(iter(xs))}): nothing to draw a line through"
    return None


def left_out(out_dir: Path, name: str, reason: str) -> None:
    """Record that figure ``name`` is left out and why: one log line (once per name and reason in this
    process) and an entry in ``<out_dir>/PLOTS_LEFT_OUT``. Returns None, so a plot function can
    ``return left_out(...)``."""
    if (name, reason) not in _logged:
        _logged.add((name, reason))
        log.info("plot %s left out: %s", name, reason)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RunDir.PLOTS_LEFT_OUT
    known = read_left_out(out_dir)
    known[name] = reason
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return None


def read_left_out(plots_dir: Path) -> dict[str, str]:
    """figure → why it was left out, from a plots folder ({} when nothing was)."""
    path = Path(plots_dir) / RunDir.PLOTS_LEFT_OUT
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def left_out_file(out_dir: Path) -> list[Path]:
    """``[the left-out record]`` when ``out_dir`` has one, else [] (to add to a run's plot files)."""
    path = Path(out_dir) / RunDir.PLOTS_LEFT_OUT
    return [path] if path.is_file() else []


def overlay(series: Mapping[str, Mapping[object, Point]], path: Path, *, metric: str, x_name: str | None = None,
            title: str = "", ylim: tuple[float, float] | None = None) -> Path | None:
    """One metric, every subject on the same axes: ``series`` is subject → {x: (value, ci_low, ci_high)}.

    With an ``x_name`` (a setting such as turns) each subject is a line with its CI as a band, left out when
    every subject has one x value; without one, each subject is a point with its CI as a whisker. Left out
    (see :func:`left_out`) when no subject has a value."""
    path = Path(path)
    reason = why_left_out({k: {x: p[0] for x, p in v.items()} for k, v in series.items()}, x_name or "x",
                          line=x_name is not None)
    if reason:
        return left_out(path.parent, path.name, reason)
    plt = pyplot()
    labels = [k for k, v in series.items() if any(finite(p[0]) for p in v.values())]
    fig, ax = plt.subplots(figsize=(6.4, 3.6) if x_name else (max(4.0, 0.9 * len(labels) + 2), 3.6))
    for i, label in enumerate(labels):
        pts = sorted((x, p) for x, p in series[label].items() if finite(p[0]))
        xs = [x for x, _ in pts] if x_name else [i] * len(pts)
        ys = [float(p[0]) for _, p in pts]
        lo = [float(p[1]) if finite(p[1]) else y for (_, p), y in zip(pts, ys)]
        hi = [float(p[2]) if finite(p[2]) else y for (_, p), y in zip(pts, ys)]
        if x_name:
            ax.plot(xs, ys, marker="o", label=label)
            ax.fill_between(xs, lo, hi, alpha=0.15)
        else:
            ax.errorbar(xs, ys, yerr=[[y - a for y, a in zip(ys, lo)], [b - y for y, b in zip(ys, hi)]], fmt="o",
                        capsize=4, label=label)
    if not x_name:
        ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 3 else 0, ha="right"
                      if len(labels) > 3 else "center", fontsize=8)
        ax.set_xlim(-0.6, len(labels) - 0.4)
    else:
        ax.set_xlabel(x_name)
        ax.legend(fontsize=8)
    if ylim:
        ax.set_ylim(*ylim)
    ax.set_ylabel(metric)
    ax.set_title(title or metric, fontsize=10)
    return save_figure(fig, path)


def names(paths: Iterable[Path | None]) -> list[Path]:
    """The figures made (None: left out)."""
    return [p for p in paths if p is not None]
