"""The options several verbs share, defined once so that a flag means the same, with the same default and help,
in every verb that has it (``--data-dir``, ``--tracking-uri``, ``--set``)."""

from __future__ import annotations

import typer

from llmrec.settings import DEFAULT_TRACKING_URI

DATA_DIR_HELP = "Data folder (default: the config's data.dir, else $LLMREC_DATA_DIR, else the per-user cache)."
STORE_HELP = f"MLflow store (default $MLFLOW_TRACKING_URI or {DEFAULT_TRACKING_URI})"
RUNS_STORE_HELP = (f"MLflow store to log to (default $MLFLOW_TRACKING_URI or {DEFAULT_TRACKING_URI}; never the store "
                   "a run directory's config names).")
SET_HELP = ("Override a config key, e.g. --set engine.n_ctx=4096 --set benchmark.turns=[2,10]; a list entry by "
            "its index (models.0.label=x, or models[0].label=x). Repeatable.")


def data_dir_option():
    return typer.Option(None, "--data-dir", help=DATA_DIR_HELP)


def tracking_uri_option(help: str = STORE_HELP + "."):
    return typer.Option(None, "--tracking-uri", help=help)


def with_tracking_uri(overrides: list[str], uri: str | None) -> list[str]:
    """``--tracking-uri X`` of a verb that runs a config: the same as ``--set tracking.uri=X``."""
    return [*overrides, f"tracking.uri={uri}"] if uri else list(overrides)
