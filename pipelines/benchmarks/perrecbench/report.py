"""The paper's Table 1 layout for one run: PTC by level × mode plus the cell average,
as a CSV artifact and a bar chart."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from llmrec.pipelines.benchmarks.perrecbench.metrics import CONTRACT_MODES


def table(metrics: dict[str, float], levels: list[str], key: str = "ptc") -> pd.DataFrame:
    rows = []
    for level in levels:
        row = {"level": level}
        for mode in CONTRACT_MODES:
            row[mode] = metrics.get(f"{key}.{level}.{mode}", math.nan)
        row["all"] = metrics.get(f"{key}.{level}", math.nan)
        rows.append(row)
    rows.append({"level": "avg", **{m: math.nan for m in CONTRACT_MODES}, "all": metrics.get(f"{key}.avg", math.nan)})
    return pd.DataFrame(rows)


def results_table(metrics: dict[str, float], levels: list[str], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "perrecbench_table.csv"
    frames = [table(metrics, levels, key).assign(metric=key) for key in ("ptc", "ptc_rank", "exact_match")]
    pd.concat(frames, ignore_index=True).to_csv(csv, index=False)
    t = table(metrics, levels).set_index("level").loc[levels, list(CONTRACT_MODES)]
    png = out_dir / "perrecbench_ptc.png"
    if t.isna().all().all():
        from llmrec.pipelines.common.plotting import left_out

        left_out(out_dir, png.name, "no level × mode with a PTC value")
        return [csv]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    t.plot.bar(ax=ax, rot=0)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_ylabel("PTC (Kendall tau)")
    ax.set_title(f"PerRecBench PTC by level and mode (avg {metrics.get('ptc.avg', math.nan):.3f})")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return [csv, png]
