"""`llmrec leaderboard`: subject × benchmark headline metrics, with their 95% CIs, from run and suite directories.

A run directory (what ``llmrec run`` writes) is one entry: its subject is the engine's model
(``resolved.yaml``), its benchmark and headline metrics those of ``benchmark.name``. A suite directory
is every entry of its ``suite.json`` (subjects, benchmark entries, ``kind`` llm | baseline), so LLM and
baseline results share one table. The table is tidy (one row per subject, entry and metric, full
precision): ``leaderboard.csv``; ``wide`` pivots it to subject rows for ``leaderboard.md`` and the terminal.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

import pandas as pd
import yaml

from llmrec import tracking
from llmrec.errors import ConfigError
from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.runner.suite_config import read_index

log = logging.getLogger(__name__)

COLUMNS = ("subject", "kind", "benchmark", "entry", "metric", "value", "ci_low", "ci_high", "run_dir")
MISSING = "—"


@dataclass(frozen=True)
class Entry:
    """One (subject, benchmark entry) result: a run directory and what the leaderboard shows of it."""

    subject: str
    benchmark: str
    entry: str
    kind: str
    run_dir: Path
    headline: tuple[str, ...]
    metrics: dict = field(repr=False)
    config: dict = field(repr=False)  # resolved.yaml ({} where the directory has none, e.g. a baseline's)
    suite: str | None = None


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read it as JSON ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _read_config(run_dir: Path) -> dict:
    path = run_dir / "resolved.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: cannot read it as YAML ({e})") from e
    return data if isinstance(data, dict) else {}


def _run_entry(run_dir: Path) -> Entry:
    cfg = _read_config(run_dir)
    name = (cfg.get("benchmark") or {}).get("name")
    if not name:
        raise ConfigError(f"{run_dir}: no resolved.yaml with benchmark.name, so not a `llmrec run` directory "
                          "(a baseline result is read through its suite's suite.json)")
    bench = get_benchmark(str(name))
    return Entry(tracking.model_label(cfg.get("engine") or {}), str(name), bench.name, "llm", run_dir,
                 tuple(bench.headline_metrics), _read_json(run_dir / "metrics.json"), cfg)


def _suite_entries(suite_dir: Path) -> list[Entry]:
    path = suite_dir / "suite.json"
    index, entries = read_index(suite_dir)
    out = []
    for i, (e, run_dir) in enumerate(entries):
        if not (run_dir / "metrics.json").is_file():  # a suite still running (or stopped) has no metrics there yet
            log.warning("%s: entries.%d (%s / %s): no metrics.json in %s yet; left out", path, i, e.subject, e.entry,
                        run_dir)
            continue
        headline = tuple(e.headline) or get_benchmark(e.benchmark).headline_metrics  # none listed: the benchmark's
        out.append(Entry(e.subject, e.benchmark, e.entry, e.kind, run_dir, headline,
                         _read_json(run_dir / "metrics.json"), _read_config(run_dir), index.name))
    return out


def load_entries(paths: Iterable[str | Path]) -> list[Entry]:
    """Every entry of the given run and suite directories, in order. Entries whose subject and benchmark entry
    coincide are told apart by their suite's name or, for plain runs, their directory's (``model (run-name)``)."""
    out: list[Entry] = []
    for p in map(Path, paths):
        if (p / "suite.json").is_file():
            out += _suite_entries(p)
        elif (p / "metrics.json").is_file():
            out.append(_run_entry(p))
        else:
            raise ConfigError(f"{p}: neither a run directory (metrics.json) nor a suite directory (suite.json)")
    seen = Counter((e.subject, e.entry) for e in out)
    return [e if seen[(e.subject, e.entry)] == 1 else replace(e, subject=f"{e.subject} ({e.suite or e.run_dir.name})")
            for e in out]


def _number(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def leaderboard(sources: Iterable[str | Path] | Iterable[Entry], metrics: Iterable[str] | None = None) -> pd.DataFrame:
    """The tidy leaderboard of run / suite directories (or of entries ``load_entries`` read): one row per
    subject, benchmark entry and metric with ``COLUMNS`` (``value``, ``ci_low``, ``ci_high`` as floats, NaN
    where the run has none). ``metrics``: these metric keys of every entry instead of each entry's headline
    metrics (an entry that has none of them is left out)."""
    sources = list(sources)
    entries = sources if all(isinstance(s, Entry) for s in sources) else load_entries(sources)
    wanted = list(metrics or [])
    rows = []
    for e in entries:
        keys = [m for m in wanted if m in e.metrics] if wanted else list(e.headline)
        for m in keys:
            rows.append((e.subject, e.kind, e.benchmark, e.entry, m, _number(e.metrics.get(m)),
                         _number(e.metrics.get(f"{m}_ci_low")), _number(e.metrics.get(f"{m}_ci_high")),
                         str(e.run_dir)))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def fmt(v: float | None) -> str:
    """A value as the tables show it: 3 decimals (whole from 1000 on), ``—`` where there is none."""
    if v is None or not math.isfinite(v):
        return MISSING
    text = f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3f}"
    return "0.000" if text == "-0.000" else text


def cell(metric: str, value: float, lo: float, hi: float) -> str:
    """``0.412 [0.301, 0.520]``; ``[—]`` where the run computed no CI for the metric; a count as ``3``."""
    if not math.isfinite(value):
        return MISSING
    if tracking.is_count(metric):
        return f"{value:.0f}"
    return f"{fmt(value)} [{fmt(lo)}, {fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else \
        f"{fmt(value)} [{MISSING}]"


def wide(df: pd.DataFrame, primary_only: bool = False) -> pd.DataFrame:
    """Subject rows (with their kind) × ``entry: metric`` columns of formatted cells (``cell``), LLMs first.
    ``primary_only``: each entry's first metric only (its headline's headline), a subject × benchmark grid."""
    if primary_only:
        first = df.groupby("entry", sort=False)["metric"].first()
        df = df[df["metric"] == df["entry"].map(first)]
    cols = list(dict.fromkeys(zip(df["entry"], df["metric"])))
    subjects = list(dict.fromkeys(zip(df["kind"], df["subject"])))
    subjects.sort(key=lambda ks: ks[0] != "llm")  # stable: LLMs, then baselines, each in first-seen order
    cells = {(r.kind, r.subject, r.entry, r.metric): cell(r.metric, r.value, r.ci_low, r.ci_high) for r in df.itertuples()}
    data = [[s, k] + [cells.get((k, s, e, m), MISSING) for e, m in cols] for k, s in subjects]
    return pd.DataFrame(data, columns=["subject", "kind"] + [f"{e}: {m}" for e, m in cols])


def markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (``|`` in a cell escaped)."""
    def row(values) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    lines = [row(table.columns), row(["---"] * len(table.columns))] + [row(r) for r in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write(df: pd.DataFrame, out_dir: Path, primary_only: bool = False) -> dict[str, Path]:
    """``leaderboard.csv`` (the tidy frame, full precision) and ``leaderboard.md`` (``wide``) in ``out_dir``."""
    files = {"csv": out_dir / "leaderboard.csv", "md": out_dir / "leaderboard.md"}
    note = ("value [95% CI]; — : not computed. Each benchmark's first headline metric; every headline metric: "
            "leaderboard.csv" if primary_only else "value [95% CI]; — : not computed.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        df.to_csv(files["csv"], index=False)
        files["md"].write_text(f"# Leaderboard\n\n{markdown(wide(df, primary_only))}\n{note}\n")
    except OSError as e:
        raise ConfigError(f"--out {out_dir}: cannot write the leaderboard files ({e.strerror or e})") from e
    return files


def tracking_config(entries: list[Entry]) -> tracking.TrackingConfig:
    """The tracking section of the first entry whose directory has a resolved.yaml, else the defaults."""
    for e in entries:
        if e.config.get("tracking"):
            return tracking.TrackingConfig.model_validate(e.config["tracking"])
    return tracking.TrackingConfig()


def log_mlflow(df: pd.DataFrame, entries: list[Entry], files: dict[str, Path], experiment: str) -> str:
    """One MLflow run holding the leaderboard: a metric per subject, entry and metric
    (``<subject>/<entry>/<metric>``, CI bounds beside it), both files as artifacts; returns its id."""
    cfg = tracking_config(entries)
    exp_id = tracking.setup(cfg.uri, experiment, cfg.artifact_root)
    client = tracking.client(cfg.uri)
    tags = tracking.run_tags("leaderboard", subjects=",".join(dict.fromkeys(df["subject"])),
                             entries=",".join(dict.fromkeys(df["entry"])))
    run_id = tracking.start_run(client, exp_id, f"leaderboard: {experiment}",
                                {"sources": ",".join(sorted({str(e.run_dir) for e in entries}))}, tags)
    values = {}
    for r in df.itertuples():
        for suffix, v in (("", r.value), ("_ci_low", r.ci_low), ("_ci_high", r.ci_high)):
            values[f"{r.subject}/{r.entry}/{r.metric}{suffix}"] = v
    tracking.log_metrics(client, run_id, values)
    for path in files.values():
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def rich_table(df: pd.DataFrame, primary_only: bool = True, title: str = "leaderboard"):
    """The leaderboard as a rich table (``llmrec leaderboard``, and ``llmrec suite``'s summary): a row per
    subject, LLMs first, baselines in italics; a column per benchmark entry's metric."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, caption_justify="left",
                  caption="value [95% CI]; — : not computed" + ("; every headline metric: leaderboard.csv"
                                                                 if primary_only else ""))
    shown = wide(df, primary_only=primary_only)
    for c in shown.columns:
        table.add_column(Text(c), justify="left" if c in ("subject", "kind") else "right")
    for row in shown.itertuples(index=False):
        table.add_row(*(Text(str(v)) for v in row), style="italic" if row[1] == "baseline" else None)
    return table
