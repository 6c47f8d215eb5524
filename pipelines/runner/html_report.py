"""`llmrec report`: one self-contained HTML file from run and suite directories.

The leaderboard (``leaderboard.leaderboard``), every run's plots (PNG inlined as base64), the paired
comparisons (``comparison.json`` files: given, or under a suite's ``comparisons/``) and a per-sample
drill-down (each benchmark's ``drilldown`` of its ``samples.parquet`` rows) with filters by run,
setting and status (inline JavaScript; the URL hash ``#status=failed&setting=…`` sets them). No
network fetch: CSS, JavaScript and images are all in the file. Every text is HTML-escaped (jinja2
autoescape): samples hold user text. Long texts are cut to ``MAX_CHARS`` behind an expander, and at
most ``max_rows`` samples per run are included (failed and over-context ones first), so the file opens.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import jinja2

from llmrec.errors import ConfigError
from llmrec.pipelines.protocol import DRILLDOWN_FIELDS, setting_of
from llmrec.pipelines.record import read_rows
from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.runner.leaderboard import MISSING, Entry, fmt, leaderboard, load_entries, wide
from llmrec.pipelines.runner.report_plots import overlays, run_figures

MAX_ROWS = 500
HEAD_CHARS = 300  # a longer text shows this much, the rest behind an expander
MAX_CHARS = 20_000  # a text is cut here (a PrefEval context can be 100k tokens)
COMPARISON_COLUMNS = ("metric", "setting", "n_pairs", "n_clusters", "a", "b", "diff", "ci_low", "ci_high", "p",
                      "p_holm", "test")


@dataclass(frozen=True)
class Text:
    full: str  # at most MAX_CHARS
    head: str
    more: bool  # longer than HEAD_CHARS: shown behind an expander
    cut: int  # characters left out beyond MAX_CHARS


def as_text(value: Any) -> Text:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        s = ""
    elif isinstance(value, str):
        s = value
    elif isinstance(value, float):
        s = fmt(value)
    elif isinstance(value, (dict, list, tuple)):
        s = json.dumps(value, ensure_ascii=False, default=str)
    else:
        s = str(value)
    return Text(s[:MAX_CHARS], s[:HEAD_CHARS], len(s) > HEAD_CHARS, max(0, len(s) - MAX_CHARS))


def read_samples(run_dir: Path) -> list[dict]:
    """The rows of a run's ``samples.parquet`` (missing values as None, nested values decoded); [] without one."""
    path = run_dir / "samples.parquet"
    if not path.is_file():
        return []
    try:
        return read_rows(path)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read it as parquet ({e})") from e


def _label(e: Entry) -> str:
    return f"{e.subject} · {e.entry}"


def drill_rows(e: Entry, max_rows: int) -> tuple[list[dict], int]:
    """At most ``max_rows`` drill-down rows of an entry (samples not ``ok`` first) and its number of samples."""
    rows = read_samples(e.run_dir)
    if not rows:
        return [], 0
    bench = get_benchmark(e.benchmark)
    rows.sort(key=lambda r: r.get("status") == "ok")  # stable: failures first, then the store's order
    out = []
    for r in rows[:max_rows]:
        try:
            view = bench.drilldown(r, None)
        except Exception as ex:  # noqa: BLE001 - one odd row must not lose the report; shown in its row
            view = {"prompt": f"(drilldown failed: {type(ex).__name__}: {ex})"}
        out.append({"run": _label(e), "sample_id": str(r.get("sample_id")), "setting": setting_of(bench, r),
                    "status": str(r.get("status") or "ok"),
                    "texts": [as_text(view.get(f)) for f in DRILLDOWN_FIELDS] + [as_text(r.get("error"))]})
    return out, len(rows)


def find_comparisons(sources: Iterable[Path], compare: Iterable[Path]) -> list[Path]:
    """``comparison.json`` files: each ``--compare`` directory's (or file), then those under each suite's
    ``comparisons/``."""
    found = []
    for c in map(Path, compare):
        path = c / "comparison.json" if c.is_dir() else c
        if not path.is_file():
            raise ConfigError(f"--compare {c}: no comparison.json there (`llmrec compare ... --out {c}` writes it)")
        found.append(path)
    for s in map(Path, sources):
        if (s / "suite.json").is_file() and (s / "comparisons").is_dir():
            found += sorted((s / "comparisons").rglob("comparison.json"))
    return list(dict.fromkeys(found))


def _comparison(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        rows = data["rows"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise TypeError("'rows' is not a list of objects")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a comparison file ({type(e).__name__}: {e})") from e
    diff = data.get("protocol_diff")
    return {"path": str(path), "runs": [str(r) for r in data.get("runs") or []],
            "protocol_diff": json.dumps(diff, ensure_ascii=False, default=str) if diff else "",
            "dropped": json.dumps(data.get("dropped"), ensure_ascii=False, default=str) if data.get("dropped") else "",
            "columns": COMPARISON_COLUMNS,
            "rows": [[_comparison_cell(c, r.get(c)) for c in COMPARISON_COLUMNS] for r in rows]}


def _comparison_cell(column: str, v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if column in ("p", "p_holm") else fmt(v)  # a p-value of 1e-5 is not 0.000
    return MISSING if v is None else str(v)


def render(sources: list[Path], compare: list[Path] = (), max_rows: int = MAX_ROWS, title: str = "llmrec report") -> str:
    """The report's HTML text."""
    entries = load_entries(sources)
    board = leaderboard(entries)
    runs, rows, notes = [], [], []
    for e in entries:
        runs.append(run_figures(_label(e), e.run_dir))
        got, total = drill_rows(e, max_rows)
        rows += got
        if total > len(got):
            notes.append(f"{_label(e)}: {len(got)} of {total} samples included (samples not ok first); "
                         f"all of them: {e.run_dir / 'samples.parquet'}")
    filters = [{"name": k, "options": sorted({r[k] for r in rows})} for k in ("run", "setting", "status")]
    env = jinja2.Environment(loader=jinja2.PackageLoader("llmrec.pipelines.runner", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    return env.get_template("report.html").render(
        title=title, generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sources=[str(s) for s in sources],
        leaderboard={name: {"columns": list(t.columns), "rows": t.values.tolist()}
                     for name, t in (("primary", wide(board, primary_only=True)), ("all", wide(board)))},
        runs=runs, overlays=overlays(entries), comparisons=[_comparison(p) for p in find_comparisons(sources, compare)],
        drill={"rows": rows, "notes": notes, "filters": filters, "fields": DRILLDOWN_FIELDS})


def write_report(sources: list[Path], out: Path, compare: list[Path] = (), max_rows: int = MAX_ROWS) -> Path:
    html = render(sources, compare, max_rows)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write the report ({e.strerror or e})") from e
    return out
