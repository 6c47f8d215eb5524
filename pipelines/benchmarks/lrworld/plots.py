"""Figures from metrics of one or more models (``{label: metrics}``): factor accuracy bars and
radar (paper Figure 5 style), the position-bias table (Table 6/11: mean ± variance over the
runs) and the noisy-profile drop per factor (Figure 6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmrec.pipelines.benchmarks.lrworld.builders.common import FACTORS, N_OPTIONS
from llmrec.pipelines.common.plotting import ci_bars, finite, left_out, pyplot, save_figure


_plt, _save = pyplot, save_figure


def _factors(models: dict[str, dict]) -> list[str]:
    """The factors some model has an accuracy for (a factor without samples has NaN or no key)."""
    return [f for f in FACTORS if any(finite(m.get(f"base/factor/{f}/accuracy")) for m in models.values())]


def factor_bars(models: dict[str, dict], path: Path) -> Path | None:
    factors = _factors(models)
    if not factors:
        return left_out(path.parent, path.name, "no factor with a scored sample")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(factors) + 2), 4))
    width = ci_bars(ax, models, factors, lambda f: f"base/factor/{f}/accuracy")
    chance = [1 / N_OPTIONS[FACTORS[f][1]] for f in factors]  # random guessing: 1/10 or 1/4
    ax.hlines(chance, np.arange(len(factors)) - width / 2, np.arange(len(factors)) + width * (len(models) - 0.5),
              colors="black", linestyles="dashed", lw=1, label="chance")
    ax.set_xticks(np.arange(len(factors)) + width * (len(models) - 1) / 2, factors, rotation=30, ha="right",
                  fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy / HitRate@1")
    ax.set_title("LRWorld: accuracy per factor (95% bootstrap CI)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def factor_radar(models: dict[str, dict], path: Path) -> Path | None:
    """Accuracy per factor on a radar, one polygon per model: only factors every model has a value for (a
    missing value drawn as 0 would read as a measured zero); left out with fewer than three."""
    factors = [f for f in _factors(models) if all(finite(m.get(f"base/factor/{f}/accuracy")) for m in models.values())]
    if len(factors) < 3:
        return left_out(path.parent, path.name, f"{len(factors)} factor(s) with an accuracy for every model; "
                        "a radar needs 3")
    plt = _plt()
    angles = np.linspace(0, 2 * np.pi, len(factors), endpoint=False).tolist()
    fig, ax = plt.subplots(figsize=(5, 5), subplot_kw={"polar": True})
    for label, m in sorted(models.items()):
        vals = [float(m[f"base/factor/{f}/accuracy"]) for f in factors]
        ax.plot(angles + angles[:1], vals + vals[:1], label=label)
    ax.set_xticks(angles, factors, fontsize=7)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def position_table(models: dict[str, dict], path: Path) -> Path | None:
    """Markdown table: mean ± variance (×100, as the paper's Table 11) per measure and model."""
    measures = sorted({k.split("/", 1)[1].rsplit("/", 1)[0] for m in models.values() for k in m
                       if k.startswith("position/") and k.endswith("/var")})
    if not measures:
        return None
    labels = sorted(models)
    lines = ["| measure | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for ms in measures:
        cells = [f"{100 * models[l].get(f'position/{ms}/mean', np.nan):.1f} ± "
                 f"{10000 * models[l].get(f'position/{ms}/var', np.nan):.2f}" for l in labels]
        lines.append(f"| {ms} | " + " | ".join(cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def noisy_drop(models: dict[str, dict], path: Path) -> Path | None:
    factors = [f for f in FACTORS if any(finite(m.get(f"noisy/factor/{f}/drop")) for m in models.values())]
    if not factors:
        return None  # no noisy variant ran: not a figure this run could have had
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(factors) + 2), 4))
    width = 0.8 / len(models)
    for k, (label, m) in enumerate(sorted(models.items())):
        ax.bar(np.arange(len(factors)) + k * width, [m.get(f"noisy/factor/{f}/drop", np.nan) for f in factors],
               width, label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(factors)) + width * (len(models) - 1) / 2, factors, rotation=30, ha="right",
                  fontsize=8)
    ax.set_ylabel("accuracy drop (clean − noisy)")
    ax.set_title("LRWorld: robustness to a noisy profile")
    ax.legend(fontsize=8)
    return _save(fig, path)


def all_plots(models: dict[str, dict], out_dir: Path) -> list[Path]:
    made = [factor_bars(models, out_dir / "lrworld_factors.png"), factor_radar(models, out_dir / "lrworld_radar.png"),
            position_table(models, out_dir / "lrworld_position_bias.md"),
            noisy_drop(models, out_dir / "lrworld_noisy_drop.png")]
    return [p for p in made if p is not None]
