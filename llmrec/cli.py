"""The `llmrec` command line. Only this module configures logging and shows progress bars."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llmrec import storage, tracking
from llmrec.errors import ConfigError, LlmrecError, RunFailed
from llmrec.exits import EXIT_CODES_HELP, ErrorsToExitCodes, exit_on_error
from llmrec.cli_options import (SET_HELP, STORE_HELP, data_dir_option, tracking_uri_option,
                                 with_tracking_uri)
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.runner import judge_failures
from llmrec.ray_start import filter_false_alarms, quiet_false_alarms
from llmrec.rundir import RunDir, SuiteDir, dumps_json, refuse_inside_runs
from llmrec.tracking import tracking_uri

# `llmrec --help` lists the verbs in the order a user works: run, read the results, compare and share them; then
# planning and clusters, scoring files, data, baselines and serving. A verb not named here follows, as registered.
WORKFLOW = ("run", "suite", "runs", "view", "leaderboard", "compare", "reproduce", "baseline", "gate", "report", "ui",
            "plan", "submit", "jobs", "score", "data", "list", "train", "tune", "baselines", "sft", "serve",
            "serve-cleanup")


class WorkflowOrder(ErrorsToExitCodes):
    def list_commands(self, ctx):
        names = list(super().list_commands(ctx))
        rank = {n: i for i, n in enumerate(WORKFLOW)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))


app = typer.Typer(cls=WorkflowOrder, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Evaluate LLMs as recommenders and assistants: Ray Data + Ray Serve + MLflow.\n\n"
                       + EXIT_CODES_HELP)
data_app = typer.Typer(no_args_is_help=True, help="Find and download benchmark data.")
app.add_typer(data_app, name="data")
console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)



def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not verbose:  # libraries that log progress at INFO: keep the terminal for our own bar and table
        from llmrec.settings import default_mlflow_log_level

        default_mlflow_log_level("WARNING")  # e.g. "Creating initial MLflow database tables": MLflow's own setup
        import ray.data  # noqa: F401 - ray.data installs its logging config on import; adjust after it
        # Ray (>= 2.59) turns token auth on for a new local instance and warns that it did: nothing to act on
        quiet_auth = "ray._private.authentication.authentication_token_setup"
        for name, level in (("ray", logging.WARNING), ("ray.data", logging.ERROR), ("mlflow", logging.WARNING),
                            ("alembic", logging.WARNING), (quiet_auth, logging.ERROR)):
            logging.getLogger(name).setLevel(level)


@app.command()
def run(
    config: Path = typer.Argument(..., help="Run config YAML (see configs/)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    data_dir: Optional[Path] = data_dir_option(),
    tracking_uri_: Optional[str] = tracking_uri_option(STORE_HELP + " (= --set tracking.uri=URI)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the request cache."),
    fresh: bool = typer.Option(False, "--fresh", help="Discard this config's stored results and start over."),
    max_failed_share: Optional[float] = typer.Option(
        None, "--max-failed-share", min=0.0, max=1.0,
        help="Exit 1 when more than this share of the samples failed (= --set execution.max_failed_share=X; "
             "default 0.1). A run whose every sample failed always exits 1."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Debug logging, and every metric and timing."),
) -> None:
    """Run an evaluation. Re-running the same config resumes: finished samples are not sent again."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.run_config import load_run_config

    _setup_logging(verbose)
    filter_false_alarms()  # before the progress bar takes the console
    overrides = with_tracking_uri(set_, tracking_uri_) + (["output.cache=false"] if no_cache else []) + (["output.resume=false"] if fresh else [])
    if max_failed_share is not None:
        overrides.append(f"execution.max_failed_share={max_failed_share}")
    cfg = load_run_config(config, overrides)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=False) as bar:
        task = bar.add_task(f"{cfg.benchmark.name}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        outcome = run_evaluation(cfg, data_dir, progress)
    judged = outcome.judged
    max_judge = cfg.execution.max_judge_failed_share
    if verbose:
        _print_metrics({**outcome.metrics, **outcome.cost}, outcome.stats)
    else:
        _print_summary({**outcome.metrics, **outcome.cost}, outcome.stats, outcome.headline, judged, max_judge)
    if outcome.stop_line:
        console.print(outcome.stop_line, markup=False)
    console.print(f"results: {outcome.run_dir}", markup=False)
    console.print(f"samples: llmrec view {outcome.run_dir}", markup=False)  # what the model saw and answered
    if outcome.mlflow_run_id:
        console.print(f"MLflow run {outcome.mlflow_run_id} — open the UI with: [bold]llmrec ui[/]"
                      f"  (or: mlflow ui --backend-store-uri {tracking_uri(cfg.tracking.uri)})")
    problems = []
    if outcome.failures.exceeds(cfg.execution.max_failed_share):
        problems.append(outcome.failures.describe(cfg.execution.max_failed_share))
    over = judge_failures.too_many(outcome.metrics, max_judge) if judged else []
    if over:
        problems.append(judge_failures.describe(over, max_judge, judged))
    if problems:
        raise RunFailed("\n".join(problems))


@app.command()
def suite(
    config: Path = typer.Argument(..., help="Suite config YAML (see configs/suite_demo.yaml): name, subjects "
                                            "(name → engine section), benchmarks (run config paths or inline "
                                            "fragments), shared execution/ray/tracking/output."),
    set_: list[str] = typer.Option([], "--set", help="Override a suite key, e.g. --set subjects.gemma.n_ctx=4096 "
                                                     "--set output.dir=runs2; an entry by its index: --set "
                                                     "benchmarks.0.execution.batch_size=2. Repeatable."),
    subject: list[str] = typer.Option([], "--subject", help="Run only this subject (repeatable); the others' "
                                                            "entries already in suite.json are kept."),
    data_dir: Optional[Path] = data_dir_option(),
    tracking_uri_: Optional[str] = tracking_uri_option(STORE_HELP + " (= --set tracking.uri=URI)."),
    fresh: bool = typer.Option(False, "--fresh", help="Discard every entry's stored results and start over."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Debug logging."),
) -> None:
    """Run every benchmark entry for every subject, starting each subject's engine once (an engine-actor
    pool in execution.mode actors, one Serve app in mode serve) for all its benchmarks.

    Each (subject, entry) is an ordinary run directory <output.dir>/<suite>/<subject>/<entry>/ with its own
    result store, indexed by <output.dir>/<suite>/suite.json. Re-running resumes, also after kill -9: finished
    entries send nothing, a half-done one sends its missing samples.

    Benchmarks with traditional baselines (PerRecBench: user_avg, item_avg) add rows of kind "baseline".

    MLflow: a parent run per subject carrying each entry's headline metrics as <entry>.<metric>, a child run
    per entry, the per-setting runs below it.

    Example: llmrec suite configs/suite_demo.yaml --set subjects.gemma.n_threads=2 (README: "Suites")
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from llmrec.pipelines.results import leaderboard as lb
    from llmrec.pipelines.runner.suite import run_suite
    from llmrec.pipelines.runner.suite_config import load_suite_config

    _setup_logging(verbose)
    filter_false_alarms()  # before the progress bar takes the console
    cfg = load_suite_config(config, with_tracking_uri(set_, tracking_uri_) + (["output.resume=false"] if fresh else []))
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        def progress_for(subj: str, entry: str):
            task = bar.add_task(f"{subj} · {entry}", total=None)
            return lambda done, total: bar.update(task, completed=done, total=total)

        out = run_suite(cfg, data_dir, list(subject), progress_for)
    local = not storage.is_uri(str(out.suite_dir))  # the leaderboard reads local directories
    board = lb.leaderboard([Path(str(out.suite_dir))]) if local and out.index["entries"] else None
    if board is not None and not board.empty:
        console.print(lb.rich_table(board, title=f"suite {cfg.name}: first headline metric per benchmark"))
    starts = ", ".join(f"{s} {v:.1f}s" for s, v in out.engine_start_s.items()) or "none (all entries finished)"
    console.print(f"engine starts: {starts}; {out.seconds:.0f}s in all", markup=False)
    console.print(f"results: {out.suite_dir}/{SuiteDir.INDEX}", markup=False)
    console.print(f"samples: llmrec view {out.suite_dir}", markup=False)  # what the models saw and answered
    if cfg.tracking.enabled:
        console.print(f"MLflow experiment {cfg.tracking.experiment or cfg.name}: a run per subject, a child per "
                      "benchmark — open the UI with: [bold]llmrec ui[/]")
    if out.errors:
        raise RunFailed("; ".join(f"{s} × {e}: {why}" for (s, e), why in out.errors.items()))


def _print_metrics(metrics: dict, stats: dict) -> None:
    table = Table(title="metrics", show_lines=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k in sorted(metrics):
        v = metrics[k]
        table.add_row(escape(k), f"{v:.4f}" if isinstance(v, float) else str(v))
    for k in sorted(stats):
        table.add_row(f"[dim]{escape(k)}[/]", f"{stats[k]:.4g}")
    console.print(table)


RUN_COUNTS = ("samples_new", "samples_resumed")


def _summary_value(key: str, metrics: dict) -> str:
    from llmrec.pipelines.common import stats as stats_

    v = metrics[key]
    if isinstance(v, float) and v.is_integer() and tracking.is_count(key):
        return str(int(v))
    text = f"{v:.4f}" if isinstance(v, float) else str(v)
    lo, hi = metrics.get(f"{key}_ci_low"), metrics.get(f"{key}_ci_high")
    if lo is not None and hi is not None:  # † where the CI rests on too few clusters (stats.MIN_CLUSTERS)
        text = f"{text}  [{lo:.3f}, {hi:.3f}]" + stats_.few_mark(metrics.get(f"{key}{stats_.CI_CLUSTERS}"))
    chance = metrics.get(f"{key}{stats_.CHANCE}")
    return text if chance is None else f"{text}  chance {chance:.3f}"


def summary_rows(metrics: dict, stats: dict, headline: tuple[str, ...], judged: tuple[str, ...] = (),
                 max_judge_failed_share: float = judge_failures.DEFAULT_MAX_SHARE) -> list[tuple[str, str]]:
    """The compact result: headline metrics (95% CI where computed; beside a ``judged`` one its judge failure rate,
    marked ``!`` above ``max_judge_failed_share``), sample counts and failures, the run's cost per 1,000 samples
    (``cost/1k``) and how many of its engine calls the request cache answered with calls made for other runs
    (``answers_from_other_runs``: ``3 of 24``) where it has a cost ledger.
    Without headline metrics: every metric but the CI bounds. Timings and the rest: ``--verbose``."""
    from llmrec import costs

    heads = [k for k in headline if k in metrics] or [k for k in sorted(metrics) if "_ci_" not in k
                                                      and not k.endswith("_chance") and not k.startswith(costs.PREFIX)]
    counts = [k for k in sorted(metrics) if tracking.is_count(k) and k not in heads]
    rows = []
    for k in heads + counts:
        jf = judge_failures.for_metric(metrics, k, judged)
        text = _summary_value(k, metrics)
        rows.append((k, text if jf is None else f"{text}  {jf.beside(max_judge_failed_share)}"))
    rows += [(costs.COLUMN, costs.per_1k_text(metrics))] if costs.TOKENS_PER_1K in metrics else []
    other = costs.other_runs_text(metrics)  # answers this run did not compute: the request cache gave another run's
    rows += [(costs.FROM_OTHER_RUNS_ROW, other)] if other is not None else []
    return rows + [(k, str(int(stats[k]))) for k in RUN_COUNTS if k in stats]


def _print_summary(metrics: dict, stats: dict, headline: tuple[str, ...], judged: tuple[str, ...] = (),
                   max_judge_failed_share: float = judge_failures.DEFAULT_MAX_SHARE) -> None:
    from rich.text import Text

    from llmrec import costs
    from llmrec.pipelines.common.stats import CHANCE, CI_CLUSTERS, FEW, FEW_LEGEND

    rows = summary_rows(metrics, stats, headline, judged, max_judge_failed_share)
    shown = {k for k, _ in rows} | {f"{k}{end}" for k, _ in rows for end in ("_ci_low", "_ci_high", CI_CLUSTERS,
                                                                             CHANCE)}
    shown |= {costs.FROM_OTHER_RUNS} if costs.FROM_OTHER_RUNS_ROW in shown else set()
    shown |= {f.scope + judge_failures.RATE for f in judge_failures.all_failures(metrics)} if judged else set()
    hidden = len((set(metrics) | set(stats)) - shown)
    judge_note = (f"; judge failed k/n: judge answers that could not be read ({judge_failures.MARK}: more than "
                  f"{judge_failures.CONFIG_KEY}={max_judge_failed_share:g})"
                  if any(judge_failures.for_metric(metrics, k, judged) for k, _ in rows) else "")
    chance = "; chance: a uniform random guess's value" if any(f"{k}{CHANCE}" in metrics for k, _ in rows) else ""
    few = f"\n{FEW_LEGEND}" if any(f"]{FEW}" in v for _, v in rows) else ""
    table = Table(title="results", show_lines=False, caption_justify="left",
                  caption=f"value [95% CI]{chance}{judge_note}; {hidden} more metrics, timings and token counts: "
                          f"--verbose, {RunDir.METRICS}, MLflow{few}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in rows:
        table.add_row(Text(k), Text(v))
    console.print(table)


@app.command()
def serve(
    config: Path = typer.Argument(..., help="Config YAML with an `engine:` section (a run config works)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    host: str = typer.Option("127.0.0.1", help="Bind address."),
    port: int = typer.Option(8000, min=0, max=65535, help="HTTP port."),
    replicas: int = typer.Option(1, min=1, help="Engine replicas."),
    verbose: bool = typer.Option(False, "-v", "--verbose"),
) -> None:
    """Serve the configured engine as a Ray Serve app with OpenAI-compatible /v1/chat/completions and /v1/models."""
    import time

    from llmrec.config import apply_overrides, read_yaml
    from llmrec.pipelines.runner.ray_env import ensure_ray
    from llmrec.pipelines.runner.run_config import RayConfig
    from llmrec.serving.engine import engine_config

    _setup_logging(verbose)
    raw = apply_overrides(read_yaml(config), set_)
    if "engine" not in raw:
        raise ConfigError(f"{config}: no 'engine:' section")
    eng = engine_config(raw["engine"])
    ensure_ray(RayConfig.model_validate(raw.get("ray") or {}))
    from llmrec.serving.serve_app import deploy

    deploy(eng, app_name="llmrec", replicas=replicas, http=True, host=host, port=port)
    console.print(f"serving {eng.type} at http://{host}:{port}/v1 (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


@app.command()
def score(
    task: str = typer.Argument(..., help="Score task, e.g. prefeval-mcq (`llmrec list` shows them all)."),
    predictions: Path = typer.Option(..., "--predictions", help="Per-sample predictions, one JSON object per line."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write {\"metrics\": {...}} here (default: print)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model to score (tasks that hold several)."),
    oracle: Optional[Path] = typer.Option(None, "--oracle", help="Oracle file (tasks that use one)."),
    items: Optional[Path] = typer.Option(None, "--items", help="Item catalog file (tasks that use one)."),
    k: Optional[int] = typer.Option(None, "--k", help="Cut-off K of top-K metrics (tasks that use one)."),
    option: list[str] = typer.Option([], "--option", help="Task-specific option key=value, repeatable."),
) -> None:
    """Recompute a task's metrics from a predictions file, without calling any model.

    Each task declares the options it takes, with their types and ranges (`llmrec list` names the tasks and
    their options); a value of the wrong type or out of range is refused before the file is read; e.g.
    `llmrec score beyond-utility --predictions P.jsonl --items ITEMS.jsonl --k 5 --out M.json`.
    """
    from llmrec.pipelines.runner.scoring import parse_option_pairs, score_file

    from llmrec.paths import refuse_overwriting_inputs

    refuse_inside_runs(out, "--out")
    if out is not None and out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give the path of the metrics file to write, "
                          f"e.g. {out / RunDir.METRICS}")
    refuse_overwriting_inputs(out, [predictions, oracle, items])
    opts = {"model": model, "oracle": str(oracle) if oracle else None,
            "items": str(items) if items else None, "k": k}
    opts.update(parse_option_pairs(option))
    text = dumps_json(score_file(task, predictions, opts))  # strict JSON: an undefined value (NaN) is null
    if out:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text + "\n")
        except OSError as e:
            raise ConfigError(f"--out {out}: cannot write the metrics file ({e.strerror or e})") from e
        console.print(f"wrote {out}", markup=False)
    else:
        print(text)


@app.command()
def runs(
    sources: Optional[list[str]] = typer.Argument(
        None, metavar="SOURCES", help="Run directories, suite directories (one line per entry), folders holding "
                                      "them (e.g. runs/) or s3:// URIs: list these, read from their files. "
                                      "Default: the MLflow tracking store's runs."),
    experiment: Optional[str] = typer.Option(None, "--experiment", help="Experiment (default: all; MLflow only)."),
    uri: Optional[str] = tracking_uri_option(),
    metric: list[str] = typer.Option([], "--metric", help="Metrics to show (repeatable; default: each run's "
                                                          "headline metric). One no run has is refused."),
    limit: Optional[int] = typer.Option(None, min=1, help="Most recent N runs (default 50); with SOURCES: the "
                                                          "first N lines (default: all)."),
    wide: bool = typer.Option(False, "--wide", help="Every column: experiment, kind, setting or config summary "
                                                    "and every headline metric."),
    as_csv: bool = typer.Option(False, "--csv", help="Every column as CSV on stdout (full precision)."),
) -> None:
    """Runs, one line each: run, benchmark, subject, headline metric [95% CI], cost per 1k samples, n, failed.

    Without SOURCES: the MLflow tracking store's most recent runs (`llmrec runs --experiment prefeval`). With SOURCES:
    the run directories themselves, the source of truth (`llmrec runs runs/my-run runs/demo_suite`,
    `llmrec runs runs/`, `llmrec runs s3://bucket/runs/x`); a directory that cannot be read is one error naming it."""
    from llmrec.pipelines.results import runs_table as rt

    if sources:
        given = [name for name, v in (("--experiment", experiment), ("--tracking-uri", uri)) if v]
        if given:
            raise ConfigError(f"{' and '.join(given)}: MLflow options, but runs are listed from SOURCES "
                              f"({', '.join(sources)}); give one or the other")
        lines = rt.stored_lines(sources)[:limit]
        title = rt.sources_title(sources)
    else:
        lines = rt.mlflow_lines(uri, experiment, limit or 50)
        title = rt.mlflow_title(uri)
    if as_csv:
        sys.stdout.write(rt.csv_text(lines, metric))
        return
    console.print(rt.table(lines, metric, title, wide, console.width))


@app.command()
def ui(
    uri: Optional[str] = tracking_uri_option(STORE_HELP + ". An http(s):// server is already a UI: its links are printed."),
    port: int = typer.Option(5000, min=0, max=65535, help="Port of the local UI."),
) -> None:
    """Open the MLflow UI on 127.0.0.1 against the tracking store and print, once it answers, a link per
    experiment (most recently used first) that opens its runs table with the headline metrics as columns.
    Stopping `llmrec ui` (Ctrl-C, SIGTERM) stops the UI."""
    from llmrec import tracking, ui_server

    store = tracking.existing_store(uri)
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    if store.startswith(("http://", "https://")):
        for name, link in ui_server.experiment_links(store):
            say(f"{name}: {link}")
        return
    say(f"starting the MLflow UI on http://127.0.0.1:{port} (store {store}) ...")
    code = ui_server.serve(store, port, say, lambda text: err.print(text, markup=False))
    if code not in (0, -2, -15):
        raise typer.Exit(code)


@data_app.command("fetch")
def data_fetch(
    benchmark: str = typer.Argument(..., help="Benchmark whose data to download, e.g. prefeval."),
    dest: Optional[Path] = typer.Option(None, "--dest", help="Target folder (default: the per-user cache)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Mirror URL replacing the pinned repository URL."),
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing when the data is already found."),
) -> None:
    """Download a benchmark's files at a pinned commit over HTTPS and verify their checksums."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.common.datasets import fetch, resolve_data_dir

    refuse_inside_runs(dest, "--dest")
    bench = get_benchmark(benchmark)
    if caps.data(bench) is None:
        raise ConfigError(f"benchmark '{benchmark}' has no downloadable data")
    if if_missing:
        try:
            found = resolve_data_dir(dest, caps.data(bench))
            console.print(f"{benchmark} data found in {found}", markup=False)
            return
        except LlmrecError:
            pass
    path = fetch(caps.data(bench), dest, base_url,
                 progress=lambda i, n, f: err.print(f"[{i}/{n}] {f}", markup=False, highlight=False))
    console.print(f"{benchmark} data in {path}", markup=False)


@data_app.command("where")
def data_where(
    benchmark: str = typer.Argument(..., help="Benchmark name."),
    data_dir: Optional[Path] = data_dir_option(),
) -> None:
    """Print the folder a benchmark's data would be read from (or why none is found)."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.common.datasets import resolve_data_dir

    console.print(str(resolve_data_dir(data_dir, caps.data(get_benchmark(benchmark)))), markup=False)


@app.command()
def train(
    config: Path = typer.Argument(..., help="Train config YAML (see configs/train_*.yaml)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run of the same config after its "
                                "last validated epoch (optimizer, early-stopping counters and RNG restored)."),
    fresh: bool = typer.Option(False, "--fresh", help="Discard the run directory's checkpoint and metrics and "
                               "train again."),
) -> None:
    """Train one traditional recommender configuration and log it to MLflow."""
    from llmrec.tuning.api import train_from_config

    result = train_from_config(str(config), list(set_), resume=resume, fresh=fresh)
    console.print_json(json.dumps(result, default=str))


@app.command()
def tune(
    config: Path = typer.Argument(..., help="Tune config YAML with a search space (see configs/tune_*.yaml)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    resume: bool = typer.Option(False, "--resume", help="Resume an interrupted sweep (Tuner.restore)."),
) -> None:
    """Sweep a recommender's hyper-parameters with Ray Tune (ASHA); one MLflow parent run, a child per trial."""
    from llmrec.tuning.api import tune_from_config

    result = tune_from_config(str(config), list(set_), resume=resume)
    console.print_json(json.dumps(result, default=str))


@app.command("list")
def list_(
) -> None:
    """List the registered benchmarks, score tasks and engines."""
    from llmrec.pipelines.registry import BENCHMARKS, SCORE_TASKS
    from llmrec.serving.engine import ENGINES

    console.print("benchmarks: " + ", ".join(BENCHMARKS.names()))
    console.print("score tasks: " + ", ".join(SCORE_TASKS.names()))
    for name in SCORE_TASKS.names():
        task = SCORE_TASKS.get(name)
        if task.options:
            console.print(f"  {name} options: {task.describe_options()}", markup=False, highlight=False)
    console.print("engines: " + ", ".join(ENGINES.names()))


def _mount_benchmark_clis() -> None:
    """Benchmark-specific verbs (``llmrec <benchmark> ...``) from each benchmark's ``cli``."""
    from llmrec.pipelines.registry import BENCHMARKS

    for name in BENCHMARKS.names():
        sub = caps.cli(BENCHMARKS.get(name))
        if sub is not None:
            app.add_typer(sub, name=name)


# Verbs that live beside the code they drive: each module has ``register(app)`` adding its commands.
EXTRA_VERBS: tuple[str, ...] = ("llmrec.pipelines.runner.serve_verbs", "llmrec.pipelines.baselines.cli",
                                 "llmrec.pipelines.runner.plan_cli", "llmrec.cluster.jobs_cli", "llmrec.tuning.sft.cli",
                                 "llmrec.pipelines.results.results_cli", "llmrec.pipelines.results.viewer_cli",
                                 "llmrec.pipelines.results.compare", "llmrec.pipelines.results.judges_cli",
                                 "llmrec.pipelines.results.reproduce", "llmrec.pipelines.results.gate")


def _mount_extra_verbs() -> None:
    import importlib

    for module in EXTRA_VERBS:
        importlib.import_module(module).register(app)


def main() -> None:
    quiet_false_alarms()  # `run` and `suite` keep Ray's false alarms off this command's stderr (llmrec.ray_start)
    _mount_extra_verbs()
    # discovery checks every benchmark: one that does not conform stops every verb, `list` included
    exit_on_error(_mount_benchmark_clis)
    app()


if __name__ == "__main__":
    main()
