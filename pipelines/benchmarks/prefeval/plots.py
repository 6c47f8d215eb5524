"""Plots logged as MLflow artifacts: accuracy vs turns (one line per method), error types per
method (generation), accuracy per study setting, and the MCQ-vs-generation scatter."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from llmrec.pipelines.benchmarks.prefeval.judge import ERROR_TYPES
from llmrec.pipelines.common.plotting import left_out, names, pyplot, save_figure, why_left_out


_plt, _save = pyplot, save_figure


def _scored(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") == "ok" and r.get("correct") is not None]


def accuracy_by_turns(rows: list[dict], path: Path,
                      title: str = "PrefEval accuracy by number of turns") -> Path | None:
    """One line per method (per form/method when several forms ran); left out with one x value or no data."""
    rows = _scored(rows)
    several_forms = len({r["form"] for r in rows}) > 1
    series: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        label = f"{r['form']}/{r['method']}" if several_forms else r["method"]
        series[label][int(r["turns"])].append(float(bool(r["correct"])))
    reason = why_left_out({k: {x: 1.0 for x in v} for k, v in series.items()}, "turns")
    if reason:
        return left_out(path.parent, path.name, reason)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, by_turn in sorted(series.items()):
        xs = sorted(by_turn)
        ax.plot(xs, [sum(by_turn[x]) / len(by_turn[x]) for x in xs], marker="o", label=label)
    ax.set_xlabel("inter-turn pairs between preference and question")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def error_types_by_method(rows: list[dict], path: Path) -> Path | None:
    """Stacked bars per method: the four error types and the remaining (correct) share."""
    rows = _scored(rows)
    if not rows:
        return left_out(path.parent, path.name, "no data")
    plt = _plt()
    methods = sorted({r["method"] for r in rows})
    fig, ax = plt.subplots(figsize=(6, 4))
    bottom = [0.0] * len(methods)
    for field in ERROR_TYPES + ("correct",):
        vals = []
        for m in methods:
            rs = [r for r in rows if r["method"] == m]
            vals.append(sum(bool(r[field]) for r in rs) / len(rs))
        ax.bar(methods, vals, bottom=bottom, label=field.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("share of samples")
    ax.set_ylim(0, 1)
    ax.set_title("PrefEval generation: error types by method")
    ax.legend(fontsize=7)
    return _save(fig, path)


def accuracy_by_study(rows: list[dict], field: str, path: Path) -> Path:
    """Accuracy per value of a study dimension (position, extra_prefs, conflict), per method."""
    plt = _plt()
    rows = _scored(rows)
    values = sorted({str(r[field]) for r in rows})
    methods = sorted({r["method"] for r in rows})
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(1, len(methods))
    for j, m in enumerate(methods):
        ys = []
        for v in values:
            rs = [r for r in rows if r["method"] == m and str(r[field]) == v]
            ys.append(sum(bool(r["correct"]) for r in rs) / len(rs) if rs else 0.0)
        ax.bar([i + j * width for i in range(len(values))], ys, width=width, label=m)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(values))], values)
    ax.set_xlabel(field)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    return _save(fig, path)


def mcq_vs_gen(points: list[dict], r: float, path: Path) -> Path:
    """points: {mcq, gen, label}; r: Pearson correlation."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter([p["mcq"] for p in points], [p["gen"] for p in points], s=18)
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.5)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("MCQ accuracy")
    ax.set_ylabel("generation accuracy")
    ax.set_title(f"PrefEval MCQ vs generation (n={len(points)}, Pearson r={r:.2f})")
    return _save(fig, path)


def run_plots(task: str, rows: list[dict], out_dir: Path) -> list[Path]:
    scored = _scored(rows)
    out: list[Path | None] = [accuracy_by_turns(rows, out_dir / "accuracy_by_turns.png",
                             f"PrefEval {'MCQ' if task == 'mcq' else 'generation'} accuracy by number of turns")]
    if task == "gen" and scored:
        out.append(error_types_by_method(rows, out_dir / "error_types_by_method.png"))
    for field in ("position", "extra_prefs", "conflict"):
        if len({str(r.get(field)) for r in scored}) > 1:
            out.append(accuracy_by_study(rows, field, out_dir / f"accuracy_by_{field}.png"))
    return names(out)
