"""Coverage per popularity bucket ({label: metrics} → one bar group per bucket, one bar per model, 95 % CI)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from llmrec.pipelines.common.plotting import ci_bars, finite, left_out, pyplot, save_figure

_BUCKET = re.compile(r"^pop/(top\d+-\d+)/coverage$")


def bucket_bars(models: dict[str, dict], path: Path) -> Path | None:
    buckets = sorted({m[1] for ms in models.values() for k in ms if (m := _BUCKET.match(k)) and finite(ms[k])},
                     key=lambda b: int(b[3:].split("-")[0]))
    if not buckets:
        return left_out(path.parent, path.name, "no popularity bucket (the catalogue has no interaction data)")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(buckets) + 2), 3.6))
    width = ci_bars(ax, models, buckets, lambda b: f"pop/{b}/coverage")
    ax.set_xticks(np.arange(len(buckets)) + width * (len(models) - 1) / 2,
                  [f"{b[3:]} % most popular" for b in buckets], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("coverage (titles reproduced)")
    ax.set_title("Memorization by item popularity (95% bootstrap CI)")
    ax.legend(fontsize=8)
    return save_figure(fig, path)
