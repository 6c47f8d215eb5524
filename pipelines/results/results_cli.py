"""`llmrec leaderboard` and `llmrec report`: read finished run and suite directories (no engine, no Ray)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from llmrec import storage
from llmrec.cli_options import RUNS_STORE_HELP, tracking_uri_option
from llmrec.errors import ConfigError
from llmrec.registry import installed_only
from llmrec.rundir import RunDir, SuiteDir, refuse_inside_runs

console = Console(width=None if sys.stdout.isatty() else 160)

SOURCES_HELP = (f"Run directories (what `llmrec run` writes: {RunDir.METRICS}, {RunDir.CONFIG}, …) and suite "
                f"directories ({SuiteDir.INDEX}: every entry, LLMs and baselines): local folders or storage URIs "
                "(s3://…, read fresh into a temporary folder). Benchmarks they name are looked up among the "
                "installed ones; nothing they name is imported.")


def leaderboard(
    paths: list[str] = typer.Argument(..., help=SOURCES_HELP),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Folder for leaderboard.md and leaderboard.csv (default: the suite directory when one "
                            "local suite is given, else ./leaderboard)."),
    metric: list[str] = typer.Option(
        [], "--metric", help="Show this metric of every entry that has it (repeatable, e.g. --metric accuracy "
                             "--metric ndcg); written to leaderboard.<metrics>.md/.csv beside the default files, "
                             "never over them. Default: each benchmark's first headline metric on screen and in "
                             "leaderboard.md, every headline metric in leaderboard.csv."),
    track: Optional[bool] = typer.Option(
        None, "--tracking/--no-tracking", help="Log the leaderboard to MLflow: one record per suite (and --metric "
                                               "selection), updated in place by every call (default: the runs' "
                                               "tracking.enabled; the store: --tracking-uri, else "
                                               "$MLFLOW_TRACKING_URI or the default, never the one their "
                                               f"{RunDir.CONFIG} names)."),
    tracking_uri_: Optional[str] = tracking_uri_option(RUNS_STORE_HELP),
) -> None:
    """Subject × benchmark headline metrics with 95% CIs, LLMs and baselines in one table.

    A subject is a suite's subject, or for a plain run directory the engine's model. Cells read
    `value [CI low, CI high] n=units`: the benchmark's CI, else a cluster bootstrap over the run's per-sample
    outcomes; `†` marks n < 30 (too few to rank); `—` where there is none. Writes leaderboard.csv (one row per
    subject, benchmark entry and metric, full precision) and leaderboard.md, e.g.
    `llmrec leaderboard runs/suite-demo` or `llmrec leaderboard runs/prefeval-a runs/prefeval-b --metric accuracy`.
    """
    from llmrec.pipelines.results import leaderboard as lb

    refuse_inside_runs(out, "--out")
    with storage.local_folders(paths) as local, installed_only():
        _leaderboard(lb, paths, local, out, metric, track, tracking_uri_)


def _leaderboard(lb, paths: list[str], local: list[Path], out: Path | None, metric: list[str],
                 track: bool | None, uri: str | None = None) -> None:
    entries = lb.load_entries(local)
    df = lb.leaderboard(entries, metric or None)
    if df.empty:
        raise ConfigError(f"no {'metric ' + ', '.join(metric) if metric else 'headline metric'} in "
                          f"{', '.join(map(str, paths))}")
    suites = {e.suite for e in entries}
    one_suite = next(iter(suites)) if len(suites) == 1 and None not in suites else None
    out = out or (local[0] if one_suite and len(paths) == 1 and not storage.is_uri(paths[0]) else Path("leaderboard"))
    refuse_inside_runs(out, "--out")
    primary = not metric
    stem = lb.file_stem(metric)
    files = lb.write(df, out, primary_only=primary, stem=stem)
    console.print(lb.rich_table(df, primary))
    console.print(f"wrote {files['md']} and {files['csv']}", markup=False, highlight=False)
    console.print(f"the samples behind a number: llmrec view {' '.join(paths)}  (then the printed address + "
                  "/samples?subject=…&entry=…&verdict=wrong)", markup=False, highlight=False)
    cfg = lb.tracking_config(entries, uri)
    if cfg.enabled if track is None else track:
        run_id = lb.log_mlflow(df, entries, files, one_suite or "llmrec-leaderboard", stem, uri)
        console.print(f"MLflow run {run_id} (experiment {one_suite or 'llmrec-leaderboard'})", markup=False,
                      highlight=False)


def report(
    paths: list[str] = typer.Argument(..., help=SOURCES_HELP),
    out: Path | None = typer.Option(None, "--out", help="The HTML file to write; default: report.html in the suite "
                                     "directory when one suite is given, else ./report.html (never over an input)."),
    compare: list[Path] = typer.Option(
        [], "--compare", help="A folder `llmrec compare … --out DIR` wrote (its comparison.json), repeatable. A "
                              "suite's comparisons/ folder is read without it."),
    max_rows: int = typer.Option(500, "--max-rows", min=1, help="Per-sample rows included per run (samples that "
                                 "failed or ran over the context first); the rest stay in samples.parquet."),
) -> None:
    """One self-contained HTML file: leaderboard, plots, comparisons and a per-sample drill-down.

    It opens offline in any browser (CSS, JavaScript and plots are inside the file). The drill-down
    shows each sample's prompt, answer, gold, verdict, status and error, filtered by run, setting and
    status; a link can carry the filter: report.html#status=failed (also run=… and setting=…, as the
    table shows them).
    E.g. `llmrec report runs/suite-demo` (writes runs/suite-demo/report.html).
    """
    from llmrec.paths import refuse_overwriting_inputs
    from llmrec.pipelines.results.html_report import write_report

    if out is None:
        one_suite = len(paths) == 1 and not storage.is_uri(paths[0]) and SuiteDir.is_suite(paths[0])
        out = Path(paths[0]) / SuiteDir.REPORT if one_suite else Path(SuiteDir.REPORT)
    refuse_overwriting_inputs(out, [*paths, *compare])
    with storage.local_folders(paths) as local, installed_only():
        path = write_report(local, out, list(compare), max_rows)
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("leaderboard")(leaderboard)
    app.command("report")(report)
