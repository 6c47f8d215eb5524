"""Plots logged as MLflow artifacts."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path


def accuracy_by_turns(rows: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("status") == "ok":
            series[f"{r['form']}/{r['method']}"][int(r["turns"])].append(float(r["correct"]))
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, by_turn in sorted(series.items()):
        xs = sorted(by_turn)
        ax.plot(xs, [sum(by_turn[x]) / len(by_turn[x]) for x in xs], marker="o", label=label)
    ax.set_xlabel("inter-turns between preference and question")
    ax.set_ylabel("MCQ accuracy")
    ax.set_ylim(0, 1)
    ax.set_title("PrefEval MCQ accuracy by number of turns")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
