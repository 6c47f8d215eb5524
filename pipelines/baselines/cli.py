"""`llmrec baselines rank CONFIG.yaml`: baselines on a benchmark's own candidates (mounted via EXTRA_VERBS)."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, help="Traditional recommenders on an LLM benchmark's candidates. (To pin a "
                                                 "finished run as the reference of `llmrec gate`: `llmrec baseline`.)")


@app.command("rank")
def rank_cmd(
    config: Path = typer.Argument(..., help="Baselines config YAML (see configs/beyond_utility_baselines.yaml)."),
    set_: list[str] = typer.Option([], "--set", help="Override a key, e.g. --set score_options.k=10."),
) -> None:
    """Train (or load) each model, rank every user's candidates, score with the benchmark's score task.

    Writes predictions_<model>.jsonl and metrics_<model>.json under `out`, logs one MLflow run per
    model to the benchmark's experiment (same metric keys as the LLM runs), and with `pool:` the
    round-robin re-ranking pool. Example:
      llmrec beyond_utility candidates configs/beyond_utility_demo.yaml --out runs/bu-cands
      llmrec baselines rank configs/beyond_utility_baselines.yaml
    """
    from llmrec.config import load_config
    from llmrec.pipelines.baselines.config import BaselinesConfig
    from llmrec.pipelines.baselines.rank import run_baselines
    from llmrec.rundir import dumps_json

    results = run_baselines(load_config(BaselinesConfig, config, list(set_)))
    typer.echo(dumps_json(results))  # strict JSON: an undefined value is null


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="baselines")
