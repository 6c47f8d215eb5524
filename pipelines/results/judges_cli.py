"""`llmrec rejudge` (judge a run's stored subject outputs again) and `llmrec judges` (agreement between judges)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from llmrec.cli_options import RUNS_STORE_HELP, data_dir_option, tracking_uri_option, with_tracking_uri
from llmrec.errors import RunFailed
from llmrec.pipelines.runner import judge_failures

console = Console(width=None if sys.stdout.isatty() else 160)


def headline_rows(metrics: dict, headline: tuple[str, ...], judged: tuple[str, ...] = (),
                  max_judge_failed_share: float = judge_failures.DEFAULT_MAX_SHARE) -> list[tuple[str, str]]:
    """(metric, ``value [95% CI]``) per headline metric the run holds; beside a judged one the judge failure rate
    (``judge failed 4/4 (100%) ! > 0.1``)."""
    out = []
    for k in [k for k in headline if k in metrics]:
        lo, hi = metrics.get(f"{k}_ci_low"), metrics.get(f"{k}_ci_high")
        v = metrics[k]
        text = f"{v:.4f}" if isinstance(v, float) and not float(v).is_integer() or lo is not None else f"{v:g}"
        if lo is not None and hi is not None:
            text += f" [{lo:.4f}, {hi:.4f}]"
        jf = judge_failures.for_metric(metrics, k, judged)
        out.append((k, text if jf is None else f"{text}  {jf.beside(max_judge_failed_share)}"))
    return out


def _headline(metrics: dict, headline: tuple[str, ...], judged: tuple[str, ...], max_share: float) -> None:
    from rich.table import Table
    from rich.text import Text

    t = Table(title="results (rejudged)")
    t.add_column("metric")
    t.add_column("value [95% CI]", justify="right")
    for k, text in headline_rows(metrics, headline, judged, max_share):
        t.add_row(Text(k), Text(text))
    console.print(t)


def register(app: typer.Typer) -> None:
    @app.command("rejudge")
    def rejudge_cmd(
        run: str = typer.Argument(..., help="the run directory whose subject outputs are judged again (local or a "
                                            "storage URI such as s3://…)"),
        judge: Path = typer.Option(..., "--judge", help="the new judge: an engine section YAML, or a YAML with "
                                                        "`judge:` (one section, or a list: a jury) and `judging:`"),
        set_: list[str] = typer.Option([], "--set", help="override a key of the new run's config, e.g. --set "
                                                          "judging.tie=first. Repeatable."),
        out: Optional[Path] = typer.Option(None, "--out", help="the new run directory (default: <the source's "
                                                               "output.dir>/<benchmark>-<config hash>)"),
        data_dir: Optional[Path] = data_dir_option(),
        tracking_uri_: Optional[str] = tracking_uri_option(
            "MLflow store of the new run (= --set tracking.uri=URI; default $MLFLOW_TRACKING_URI or the default store, "
            "never the one the source run's config names)."),
        fresh: bool = typer.Option(False, "--fresh", help="discard the new run's stored results and start over"),
        verbose: bool = typer.Option(False, "-v", "--verbose"),
    ) -> None:
        """Run only the judge stages of a judged benchmark (PrefEval generation, GISTBench) over a run's stored
        subject outputs, with another judge, into a new run directory whose config names the source run. No
        subject engine is started and no subject request is sent; re-running resumes. Exits 1 (results kept) when
        the new judge's answers could not be read for more than execution.max_judge_failed_share of the judged
        units (default 0.1; --set execution.max_judge_failed_share=X), and always when none could be read."""
        from llmrec import storage
        from llmrec.pipelines.results.rejudge import refuse_out, rejudge_config, run_rejudge
        from llmrec.registry import installed_only

        refuse_out(out, run)

        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if not verbose:  # Ray Data's progress lines would interleave with the results table
            import ray.data  # noqa: F401 - ray.data installs its logging config on import; adjust after it

            for name, level in (("ray", logging.WARNING), ("ray.data", logging.ERROR)):
                logging.getLogger(name).setLevel(level)
        overrides = with_tracking_uri(list(set_), tracking_uri_) + (["output.resume=false"] if fresh else [])
        with storage.local_folders([run]) as (local,):
            with installed_only():
                cfg, _ = rejudge_config(local, judge, overrides, out, run if storage.is_uri(run) else None)
            outcome, source = run_rejudge(cfg, local, data_dir)
        max_share = cfg.execution.max_judge_failed_share
        _headline(outcome.metrics, outcome.headline, outcome.judged, max_share)
        console.print(f"judged again: {outcome.stats.get('samples_new', 0):.0f} new, "
                      f"{outcome.stats.get('samples_resumed', 0):.0f} resumed; subject failures kept: "
                      f"{source.carried}; not stored in the source: {source.missing}", markup=False)
        console.print(f"results: {outcome.run_dir}", markup=False)
        console.print(f"agreement with the source's judge: llmrec judges {run} {outcome.run_dir}", markup=False)
        over = judge_failures.too_many(outcome.metrics, max_share) if outcome.judged else []
        if over:
            raise RunFailed(judge_failures.describe(over, max_share, outcome.judged))

    @app.command("judges")
    def judges_cmd(
        runs: list[str] = typer.Argument(..., help="two run directories that judged the same subject outputs (a run "
                                                   "and its `llmrec rejudge`), or one jury run"),
        out: Optional[Path] = typer.Option(None, "--out", help="where judges.json goes (default: <parent of the "
                                                               "first run>/comparisons/judges-<a>--vs--<b>)"),
        resamples: int = typer.Option(2000, "--resamples", min=100, help="bootstrap resamples"),
        seed: int = typer.Option(0, "--seed", help="seed of the bootstrap draws"),
        data_dir: Optional[Path] = data_dir_option(),
        tracking: bool = typer.Option(True, "--tracking/--no-tracking", help="log an MLflow run (kind judges)"),
        tracking_uri_: Optional[str] = tracking_uri_option(RUNS_STORE_HELP),
        human: bool = typer.Option(False, "--human", help="One run: its judge(s) (a jury: each juror too) against "
                                                          "people's labels (`llmrec view RUN --annotate`), and the "
                                                          "headline metrics with people's verdicts on the labelled "
                                                          "samples."),
    ) -> None:
        """Agreement between judges: per judged decision raw agreement, Cohen's kappa with a cluster bootstrap CI
        and the confusion matrix; then the headline metrics under each judge, B − A with its paired CI. With
        --human: people's labels are the other judge."""
        from llmrec import storage
        from llmrec.pipelines.results.compare import _slug, load_run
        from llmrec.pipelines.results.judge_agreement import judges_report, log_mlflow, tables, write_report
        from llmrec.registry import installed_only
        from llmrec.rundir import RunDir, refuse_inside_runs

        refuse_inside_runs(out, "--out")
        if human and len(runs) != 1:
            from llmrec.errors import ConfigError

            raise ConfigError(f"--human takes one run (its labels are read from it), got {len(runs)}")
        with storage.local_folders(runs) as local, installed_only():
            if human:
                from llmrec.pipelines.results.human_agreement import human_report, human_tables

                report = human_report(local[0], data_dir, resamples, seed)
                shown = human_tables(report)
            else:
                report = judges_report(local, data_dir, resamples, seed)
                shown = tables(report)
            for t in shown:
                console.print(t)
            names = "--vs--".join([Path(p).name for p in local] + (["human"] if human else []))
            here = Path(".") if any(storage.is_uri(r) for r in runs) else Path(local[0]).resolve().parent
            target = out or here / RunDir.COMPARISONS / _slug(f"judges-{names}")[:200]
            refuse_inside_runs(target, "--out")
            f = write_report(report, target)
            console.print(f"wrote {f}", markup=False)
            if tracking:
                run_id = log_mlflow(report, load_run(Path(local[-1]).resolve(), Path(local[-1]).name), [f],
                                    tracking_uri_)
                if run_id:
                    console.print(f"MLflow run {run_id} (kind judges)", markup=False)
