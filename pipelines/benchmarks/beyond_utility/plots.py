"""Run outputs beside the runner's: per-setting contract files and the two figures.

``plots`` writes, in the run directory, ``items.jsonl`` and ``predictions/<setting>.jsonl``
(each one ``llmrec score beyond-utility`` input), ``position_bias.png`` (HR by the target's
position among the presented candidates, per order) and ``history_length.png`` (HR/NDCG per
shown history length, per prompt) when the run holds more than one length.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from llmrec.pipelines.benchmarks.beyond_utility import results
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.common.plotting import left_out, pyplot, save_figure, why_left_out


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name.replace(",", "__"))


def write_contract_files(cfg: BeyondUtilityConfig, rows: list[dict], run_dir: Path, assets: dict | None) -> list[Path]:
    ds, _ = results.lookup(assets, rows[0])
    files = [ds.write_items(run_dir / "items.jsonl"), write_candidates(rows, run_dir / "candidates.jsonl", assets)]
    folder = run_dir / "predictions"
    folder.mkdir(parents=True, exist_ok=True)
    for name, rs in results.by_setting(rows).items():
        path = folder / f"{_slug(name)}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for r in rs:
                fh.write(json.dumps(results.contract_line(r, assets)) + "\n")
        files.append(path)
    return files


def candidate_lines(rows: list[dict], assets: dict | None) -> list[dict]:
    """One line per user of the candidates file the baselines rank (the shuffled order when present).

    ``{"user_id", "history": [raw ids, oldest first, all before the target], "candidates": [raw ids as
    presented], "ids": [contract id per candidate], "line": {user_id, target, candidates, history_len,
    base_candidates}}`` — a ranker writes ``dict(line, ranked=[ids of its top L])``.
    """
    ds, _ = results.lookup(assets, rows[0])
    raw = ds.raw_id
    chosen: dict[str, dict] = {}
    for r in rows:
        if r["user_id"] not in chosen or (r["order"] == "shuffled" and chosen[r["user_id"]]["order"] != "shuffled"):
            chosen[r["user_id"]] = r
    out = []
    for user, r in sorted(chosen.items()):
        line = {k: r[k] for k in ("user_id", "target", "candidates", "history_len", "base_candidates")}
        out.append({"user_id": user, "history": ds.sequences[user][:-1], "candidates": [raw[i] for i in r["candidates"]],
                    "ids": list(r["candidates"]), "line": line})
    return out


def write_candidates(rows: list[dict], path: Path, assets: dict | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for line in candidate_lines(rows, assets):
            fh.write(json.dumps(line) + "\n")
    return path


def position_plot(cfg: BeyondUtilityConfig, rows: list[dict], out: Path, assets: dict | None) -> Path | None:
    by_order = {order: results.accuracy_by_position(cfg, [r for r in rows if r["order"] == order], assets)
                for order in sorted({r["order"] for r in rows})}
    reason = why_left_out({o: {x: v[0] for x, v in acc.items()} for o, acc in by_order.items()}, "target position")
    if reason:
        return left_out(out.parent, out.name, reason)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for order, acc in by_order.items():
        if acc:
            ax.plot(list(acc), [v[0] for v in acc.values()], marker="o", label=order)
    ax.set_xlabel("target position among the candidates")
    ax.set_ylabel(f"HR@{cfg.k}")
    ax.set_title("accuracy by target position")
    ax.legend()
    return save_figure(fig, out)


def history_plot(cfg: BeyondUtilityConfig, rows: list[dict], out: Path, assets: dict | None) -> Path | None:
    lengths = sorted({r["history_shown"] for r in rows}, key=lambda h: (h == "all", int(h) if h != "all" else 0))
    if len(lengths) < 2:
        return left_out(out.parent, out.name, f"one history length value ({lengths[0] if lengths else 'none'}): "
                        "nothing to draw a line through")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    order = rows[0]["order"]
    for prompt in sorted({r["prompt"] for r in rows}):
        groups = [(h, [r for r in rows if r["prompt"] == prompt and r["history_shown"] == h and r["order"] == order])
                  for h in lengths]
        groups = [(h, rs) for h, rs in groups if rs]
        for key in ("hr", "ndcg"):
            ax.plot([h for h, _ in groups], [results.setting_metrics(cfg, rs, assets)[key] for _, rs in groups], marker="o",
                    label=f"{prompt} {key}@{cfg.k}")
    ax.set_xlabel("history items shown")
    ax.legend()
    return save_figure(fig, out)


def make(cfg: BeyondUtilityConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
    rows = [r for r in rows if r.get("catalog_key")]
    if not rows:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    files = write_contract_files(cfg, rows, out_dir.parent, assets)
    for fn, name in ((position_plot, "position_bias.png"), (history_plot, "history_length.png")):
        path = fn(cfg, rows, out_dir / name, assets)
        if path is not None:
            files.append(path)
    return files
