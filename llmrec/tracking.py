"""MLflow logging conventions shared by runs, training and sweeps.

Default store: sqlite ``./mlruns.db`` with artifacts in ``./mlartifacts`` (a server URI
works too). One experiment per benchmark. Params are the flattened config minus
secrets; tags carry the git commit, data fingerprint and protocol.
"""

from __future__ import annotations

import logging
import math
import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field

from llmrec import settings
from llmrec.config import StrictModel, flatten

log = logging.getLogger(__name__)

SECRET_WORDS = ("key", "token", "secret", "password")
MAX_PARAM_LEN = 6000


class TrackingConfig(StrictModel):
    """MLflow tracking section shared by run, train and tune configs."""

    enabled: bool = Field(True, description="log to MLflow")
    uri: str | None = Field(None, description="MLflow tracking URI; default $MLFLOW_TRACKING_URI or sqlite:///mlruns.db")
    artifact_root: str = Field(settings.DEFAULT_ARTIFACT_ROOT, description="artifact location of new experiments")
    experiment: str | None = Field(None, description="experiment name; default: the benchmark name")


def tracking_uri(configured: str | None = None) -> str:
    return configured or settings.env_tracking_uri() or settings.DEFAULT_TRACKING_URI


def setup(uri: str | None, experiment: str, artifact_root: str = settings.DEFAULT_ARTIFACT_ROOT) -> str:
    """Point MLflow at the store and make sure the experiment exists; returns its id."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri(uri))
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is None:
        location = artifact_root
        if "://" not in location:
            location = Path(location).resolve().as_uri()
        return mlflow.create_experiment(experiment, artifact_location=location)
    return exp.experiment_id


def safe_params(config: dict) -> dict[str, str]:
    """Flattened config without secret-looking keys (their *names* of env vars are fine)."""
    out = {}
    for k, v in flatten(config).items():
        leaf = k.rsplit(".", 1)[-1].lower()
        if any(w in leaf for w in SECRET_WORDS) and not leaf.endswith("_env"):
            continue
        out[k] = str(v)[:MAX_PARAM_LEN]
    return out


def finite_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out[k.replace("=", "_")] = f
    return out


def git_commit(cwd: Path | None = None) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=cwd or Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
