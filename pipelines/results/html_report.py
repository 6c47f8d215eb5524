"""`llmrec report`: one self-contained HTML file from run and suite directories.

The leaderboard (``leaderboard.leaderboard``), every run's plots (PNG inlined as base64), the paired
comparisons (``comparison.json`` files: given, or under a suite's ``comparisons/``) and a per-sample
drill-down (each benchmark's ``drilldown`` of its ``samples.parquet`` rows) with filters by run,
setting and status (inline JavaScript; the URL hash ``#status=failed&setting=…`` sets them). No
network fetch: CSS, JavaScript and images are all in the file. Every text is HTML-escaped (jinja2
autoescape): samples hold user text. Long texts are cut to ``MAX_CHARS`` behind an expander, and at
most ``max_rows`` samples per run are included (failed ones first, then wrong, missed), so the file opens.

The drill-down's answer, gold and verdict are each benchmark's ``explain`` words; the transcripts of the rows
(every call's messages and output) are embedded up to ``TRANSCRIPT_MB`` in all, failed and wrong ones first; the
leaderboard's values and the drill-down's sample ids name the ``llmrec view`` path of their samples (links once the
reader pastes the address ``llmrec view`` printed).
"""

from __future__ import annotations

import json
import shlex
from urllib.parse import urlencode
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import jinja2

from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import DRILLDOWN_FIELDS, Explanation, failed_explanation, setting_of
from llmrec.pipelines.record import read_rows
from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.common.stats import FEW_LEGEND, few_mark
from llmrec.pipelines.results import memorized
from llmrec.pipelines.results.leaderboard import (EARLY, MISSING, SMALL, SMALL_TEXT, fmt, leaderboard, load_entries,
                                                  wide)
from llmrec.pipelines.results.memorized import memorization_splits
from llmrec.pipelines.results.stored import StoredRun
from llmrec.rundir import RunDir, SuiteDir
from llmrec.pipelines.results.report_plots import overlays, run_figures

MAX_ROWS = 500
TRANSCRIPT_MB = 5.0  # transcripts embedded in the report, in all (failures and wrong answers first)
VERDICT_ORDER = {"failed": 0, "wrong": 1, "missed": 2, "right": 4}  # the drill-down's order: what went wrong first
HEAD_CHARS = 300  # a longer text shows this much, the rest behind an expander
MAX_CHARS = 20_000  # a text is cut here (a PrefEval context can be 100k tokens)
COMPARISON_COLUMNS = ("metric", "setting", "A", "B", "diff", "95% CI", "p", "p_holm", "n (clusters)", "test")


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


def _label(e: StoredRun) -> str:
    return e.label


def _explain(bench, row: dict) -> Explanation:
    try:
        return caps.explain(bench, row) or failed_explanation(row) or Explanation()
    except Exception as ex:  # noqa: BLE001 - one odd row must not lose the report; shown in its row
        return failed_explanation(row) or Explanation(reason=f"explain failed: {type(ex).__name__}: {ex}")


def drill_rows(e: StoredRun, max_rows: int) -> tuple[list[dict], int]:
    """At most ``max_rows`` drill-down rows of an entry (failed samples first, then wrong, missed, unscored and
    right ones) and its number of samples. Answer, gold and verdict are the benchmark's ``explain`` words."""
    rows = e.samples() or []
    if not rows:
        return [], 0
    bench = get_benchmark(e.benchmark)
    explained = [(r, _explain(bench, r)) for r in rows]
    explained.sort(key=lambda re: (re[0].get("status") == "ok", VERDICT_ORDER.get(re[1].verdict or "", 3)))
    out = []
    for r, ex in explained[:max_rows]:
        try:
            view = {**caps.drilldown(bench, r, None), **ex.cells()}
        except Exception as err:  # noqa: BLE001 - one odd row must not lose the report; shown in its row
            view = {"prompt": f"(drilldown failed: {type(err).__name__}: {err})", **ex.cells()}
        sid = str(r.get("sample_id"))
        out.append({"run": _label(e), "sample_id": sid, "setting": setting_of(bench, r),
                    "status": str(r.get("status") or "ok"), "verdict": ex.verdict or "",
                    "view": "/sample?" + urlencode({"subject": e.subject, "entry": e.entry, "id": sid}),
                    "texts": [as_text(view.get(f)) for f in DRILLDOWN_FIELDS] + [as_text(r.get("error"))],
                    "transcript": None, "_source": (e, r, ex)})
    return out, len(rows)


def embed_transcripts(rows: list[dict], cap_mb: float = TRANSCRIPT_MB) -> tuple[int, int]:
    """Render the transcripts of drill-down rows into them (``row["transcript"]``, escaped HTML), failures and
    wrong answers first, until ``cap_mb`` megabytes; returns (embedded, skipped over the cap)."""
    from markupsafe import Markup

    from llmrec.pipelines.results.viewer import templates, transcript_of

    macro = templates().get_template("viewer_transcript.html").module.transcript
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["status"] == "ok",
                                                     VERDICT_ORDER.get(rows[i]["verdict"], 3)))
    used, done, skipped, cap = 0, 0, 0, int(cap_mb * 1e6)
    for i in order:
        e, r, ex = rows[i]["_source"]
        if not r.get("outputs"):
            continue
        html = str(macro(transcript_of(e, r, ex)))
        if used + len(html.encode("utf-8")) > cap:
            skipped += 1
            continue
        used += len(html.encode("utf-8"))
        rows[i]["transcript"] = Markup(html)
        done += 1
    return done, skipped


def board_links(board, primary_only: bool) -> list[list[str]]:
    """For each cell of ``wide(board)``: the viewer path of the samples behind it (subject and entry), '' for the
    subject and kind columns."""
    from llmrec.pipelines.results.viewer import samples_path

    table = wide(board, primary_only=primary_only)
    entries = [c.split(": ", 1)[0] for c in table.columns[2:]]
    return [["", ""] + [samples_path(subject=str(row[0]), entry=entry) for entry in entries]
            for row in table.itertuples(index=False)]


def find_comparisons(sources: Iterable[Path], compare: Iterable[Path]) -> list[Path]:
    """Comparison files: each ``--compare`` directory's (or file), then those under each suite's comparisons
    folder (``SuiteDir.COMPARISONS``, where ``llmrec compare SUITE`` writes)."""
    found = []
    for c in map(Path, compare):
        path = c / COMPARISON_FILE if c.is_dir() else c
        if not path.is_file():
            raise ConfigError(f"--compare {c}: no {COMPARISON_FILE} there (`llmrec compare ... --out {c}` writes it)")
        found.append(path)
    for s in map(Path, sources):
        if SuiteDir.is_suite(s) and (s / SuiteDir.COMPARISONS).is_dir():
            found += sorted((s / SuiteDir.COMPARISONS).rglob(COMPARISON_FILE))
    return list(dict.fromkeys(found))


COMPARISON_FILE = "comparison.json"


def _comparison(path: Path) -> dict:
    """A comparison file as the report shows it: a title naming A and B, the rows (A and B values, the difference
    with its CI, p, Holm's p, n), the protocol keys that differ (only when some do) and what was dropped."""
    from llmrec.pipelines.results.compare import fmt_p, judge_cell

    try:
        data = json.loads(path.read_text())
        rows = data["rows"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise TypeError("'rows' is not a list of objects")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a comparison file ({type(e).__name__}: {e})") from e
    runs = [r.get("label") or r.get("run_dir") if isinstance(r, dict) else str(r) for r in data.get("runs") or []]
    diff = data.get("protocol_diff")
    differences = diff.get("differences") if isinstance(diff, dict) else diff if isinstance(diff, list) else []
    keys = sorted({str(d.get("key")) for d in differences or [] if isinstance(d, dict) and d.get("key")})
    pairs = list(dict.fromkeys((str(r.get("a", "")), str(r.get("b", ""))) for r in rows))
    labelled = all(not isinstance(r.get("a"), (int, float)) for r in rows)  # a and b are run labels (not values)
    several = labelled and len(pairs) > 1
    judged = any("judge_failure_rate_a" in r for r in rows)
    columns = (("A vs B",) if several else ()) + COMPARISON_COLUMNS + (("judge failed A / B",) if judged else ())

    def row(r: dict) -> list[str]:
        va = r.get("value_a", None if labelled else r.get("a"))
        vb = r.get("value_b", None if labelled else r.get("b"))
        lo, hi = _comparison_cell(r.get("ci_low")), _comparison_cell(r.get("ci_high"))
        n = f"{r.get('n_pairs', MISSING)} ({r.get('n_clusters', MISSING)})"
        few = few_mark(r.get("n_clusters"))  # CI and p from too few clusters
        cells = [str(r.get("metric", "")), str(r.get("setting", "")), _comparison_cell(va), _comparison_cell(vb),
                 _comparison_cell(r.get("diff")), f"[{lo}, {hi}]{few}", fmt_p(r.get("p")) + few,
                 fmt_p(r.get("p_holm")) + few, n, str(r.get("test", MISSING))] + ([judge_cell(r)] if judged else [])
        return ([f"{r.get('a')} vs {r.get('b')}"] if several else []) + cells

    if labelled and len(pairs) == 1:
        title = f"A = {pairs[0][0]}, B = {pairs[0][1]}"
    elif labelled:  # a suite's entries: its subjects (the entry is in each row)
        sides = [list(dict.fromkeys(p[i].split("/", 1)[0] for p in pairs)) for i in (0, 1)]
        title = f"A = {', '.join(sides[0])}, B = {', '.join(sides[1])}"
    else:
        title = " vs ".join(map(str, runs)) or path.parent.name
    dirs = [r.get("run_dir") for r in data.get("runs") or [] if isinstance(r, dict) and r.get("run_dir")]
    view = f"llmrec view {shlex.quote(dirs[0])} {shlex.quote(dirs[1])}" if len(dirs) == 2 else None
    return {"path": str(path), "title": title, "runs": [str(r) for r in runs], "protocol_keys": keys, "view": view,
            "dropped": _dropped_lines(data.get("dropped")), "columns": columns, "rows": [row(r) for r in rows],
            "few": any(few_mark(r.get("n_clusters")) for r in rows), "judges": _judges(path.parent / JUDGES_FILE)}


JUDGES_FILE = "judges.json"  # written by `llmrec compare` beside comparison.json when the runs' judges differ
def _judges(path: Path) -> list[dict]:
    """The judges' agreement beside a comparison (``results.judge_agreement``): a table per pair of judges, with
    each judge's unreadable answers and a refused κ's reason."""
    from llmrec.pipelines.results.judge_agreement import AGREEMENT_COLUMNS as JUDGES_COLUMNS, agreement_cells

    if not path.is_file():
        return []
    try:
        pairs = json.loads(path.read_text())["pairs"]
        out = []
        for p in pairs:
            rows = [agreement_cells(d) for d in p["agreement"]]
            out.append({"title": f"judge agreement: A = {p['a']}, B = {p['b']} ({p['paired_samples']} samples)",
                        "columns": JUDGES_COLUMNS, "rows": rows,
                        "few": any(few_mark(d["n_clusters"]) for d in p["agreement"])})
        return out
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a judges file ({type(e).__name__}: {e})") from e


def _dropped_lines(dropped: Any) -> list[str]:
    """What a comparison left out, one readable line per comparison (none when nothing was dropped)."""
    out = []
    for d in dropped if isinstance(dropped, list) else []:
        if not isinstance(d, dict):
            continue
        parts = [f"{k.replace('_', ' ')} {d[k]}" for k in ("missing_in_a", "missing_in_b", "failed_in_a",
                                                             "failed_in_b", "failed_in_both") if d.get(k)]
        parts += [f"no outcome for {m} in one run: {n}" for m, n in (d.get("no_outcome") or {}).items()]
        if parts:
            out.append(f"{d.get('b')} vs {d.get('a')}: " + ", ".join(parts))
    return out


def _comparison_cell(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt(float(v))
    return MISSING if v is None else str(v)


def _memorized(entries) -> dict | None:
    """The headline metrics of runs about items split by whether the subject memorized each item (its probe run among
    the sources); None where no subject has both."""
    splits = memorization_splits(entries)
    if not splits:
        return None
    return {"columns": memorized.HEADER, "rows": [memorized.cells(s) for s in splits], "caption": memorized.CAPTION}


def people(entries, resamples: int = 2000) -> list[dict]:
    """Each run people labelled (``llmrec view --annotate``) against its judge(s), as ``llmrec judges RUN --human``
    prints it: per judge, agreement and κ per decision, then the headline metrics with people's verdicts."""
    from llmrec.pipelines.results.human_agreement import human_report
    from llmrec.pipelines.results.judge_agreement import AGREEMENT_COLUMNS, _fmt, agreement_cells

    out = []
    for e in entries:
        if not e.dir.local or not e.dir.labels_text().strip():  # labels are written to local run directories
            continue
        report = human_report(e.run_dir, resamples=resamples)
        who = next(j for j in report["judges"] if j["label"] == "human")
        for p in report["pairs"]:
            moves = [[r["metric"], "–", f"not recomputed: {r['not_recomputed']}", "", f"– / {r['n']}"]
                     if r["not_recomputed"] else
                     [r["metric"], _fmt(r["judge"]), _fmt(r["with_human"]),
                      f"{_fmt(r['diff'], '+.3f')} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]",
                      f"{r['n_labelled']} / {r['n']}"] for r in p["human_metrics"]]
            out.append({"title": f"{_label(e)}: judge {p['a']} against people ({', '.join(who['who'])}; "
                                 f"{p['paired_samples']} labelled samples)",
                        "columns": [c.replace("A / B", "judge / people").replace("rows A, columns B",
                                                                               "rows judge, columns people")
                                    for c in AGREEMENT_COLUMNS],
                        "rows": [agreement_cells(d) for d in p["agreement"]],
                        "metric_columns": ["metric", "as judged", "with people's verdicts", "diff [95% CI]",
                                           "labelled / n"],
                        "metrics": moves})
    return out


def _count(v: Any) -> str:
    return f"{v:.0f}" if isinstance(v, (int, float)) and math.isfinite(v) else MISSING


def stopped_early(entries) -> list[str]:
    """One line per run that ``execution.stop_when`` stopped before its full set: the decision, the share of samples
    and clusters it ran, and the confidence sequence's bounds (its ``stop_when/`` metrics)."""
    from llmrec.pipelines.common.sequential import NOT_WORSE, UNDECIDED, WORSE

    words = {1.0: NOT_WORSE, -1.0: WORSE, 0.0: UNDECIDED}
    out = []
    for e in entries:
        m = e.metrics
        if m.get("stop_when/stopped_early") != 1:
            continue
        out.append(f"{_label(e)}: {words.get(m.get('stop_when/decision'), '?')} than its baseline by more than "
                   f"{fmt(m.get('stop_when/margin'))}, after {float(m.get('stop_when/share_used', math.nan)):.0%} of "
                   f"its samples ({_count(m.get('stop_when/clusters_used'))} of {_count(m.get('stop_when/clusters_total'))} "
                   f"clusters); difference {fmt(m.get('stop_when/estimate'))}, "
                   f"{1 - float(m.get('stop_when/alpha', math.nan)):.0%} confidence sequence "
                   f"[{fmt(m.get('stop_when/lower'))}, {fmt(m.get('stop_when/upper'))}]; its metrics are over the "
                   "samples it ran")
    return out


def render(sources: list[Path], compare: list[Path] = (), max_rows: int = MAX_ROWS, title: str = "llmrec report",
           transcript_mb: float = TRANSCRIPT_MB) -> str:
    """The report's HTML text."""
    entries = load_entries(sources)
    board = leaderboard(entries)
    runs, rows, notes = [], [], []
    for e in entries:
        runs.append(run_figures(_label(e), e))
        got, total = drill_rows(e, max_rows)
        rows += got
        if total > len(got):
            notes.append(f"{_label(e)}: {len(got)} of {total} samples included (failed and wrong ones first); "
                         f"all of them: {e.samples_location}, or `llmrec view`")
    embedded, skipped = embed_transcripts(rows, transcript_mb)
    for r in rows:
        r.pop("_source", None)
    filters = [{"name": k, "options": sorted({r[k] for r in rows})} for k in ("run", "setting", "status", "verdict")]
    env = jinja2.Environment(loader=jinja2.PackageLoader("llmrec.pipelines.results", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    return env.get_template("report.html").render(
        title=title, generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sources=[str(s) for s in sources],
        leaderboard={name: {"columns": list(t.columns), "rows": t.values.tolist(),
                            "links": board_links(board, name == "primary") if not board.empty else []}
                     for name, t in (("primary", wide(board, primary_only=True)), ("all", wide(board)))},
        viewer={"command": "llmrec view " + " ".join(str(s) for s in sources), "embedded": embedded,
                "skipped": skipped, "cap_mb": transcript_mb},
        runs=runs, overlays=overlays(entries), comparisons=[_comparison(p) for p in find_comparisons(sources, compare)],
        memorized=_memorized(entries), people=people(entries),
        small_legend=f"{SMALL}: {SMALL_TEXT}", few_legend=FEW_LEGEND, stopped=stopped_early(entries),
        early_legend=f"{EARLY} x%: stopped early by execution.stop_when after x% of its samples",
        drill={"rows": rows, "notes": notes, "filters": filters, "fields": DRILLDOWN_FIELDS})


def write_report(sources: list[Path], out: Path, compare: list[Path] = (), max_rows: int = MAX_ROWS) -> Path:
    html = render(sources, compare, max_rows)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write the report ({e.strerror or e})") from e
    return out
