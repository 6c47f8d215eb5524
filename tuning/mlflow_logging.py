"""MLflow logging for training runs and sweeps.

A sweep is one parent run with one child run per trial (params = the trial's sampled
values and its full config; metrics = per-epoch validation metrics at ``step = epoch`` and
the final ``test/...`` metrics). Logging happens in the Tune driver through ``MLflowTrialLogger``
(a ``tune.Callback``), so a sqlite store has a single writer. Metric names are made
MLflow-safe by ``mlflow_key`` (``valid/ndcg@10`` -> ``valid/ndcg_at_10``).
Params go through ``llmrec.tracking.safe_params`` (secret-looking keys dropped) and metrics
through ``finite_metrics``; runs are tagged with the git commit, as every llmrec run is.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from llmrec.tracking import finite_metrics, git_commit, safe_params, tracking_uri

logger = logging.getLogger(__name__)
TRIAL_TAG = "llmrec.trial_id"
PARENT_TAG = "mlflow.parentRunId"


__all__ = ["MLflowTrialLogger", "client_for", "experiment_id", "log_metrics", "log_params", "start_run", "tracking_uri"]


def mlflow_key(name: str) -> str:
    """An MLflow-valid metric/param key (``@`` is not allowed)."""
    return name.replace("@", "_at_")


def client_for(uri: str):
    """An ``MlflowClient`` bound to ``uri`` (no process-global tracking state is touched)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def experiment_id(client, name: str, artifact_root: str) -> str:
    """Id of experiment ``name``, created with ``artifact_root`` as its artifact location if new."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    from llmrec import storage

    where = storage.resolve(artifact_root)  # s3://… kept; a local path made absolute on the driver
    return client.create_experiment(name, artifact_location=where if storage.is_uri(where) else Path(where).as_uri())


def start_run(client, exp_id: str, name: str, params: dict[str, Any], tags: dict[str, str] | None = None) -> str:
    """Create a run with ``params`` (flattened, values as strings) and return its id."""
    run = client.create_run(exp_id, run_name=name, tags={"llmrec.git_commit": git_commit(), **(tags or {})})
    log_params(client, run.info.run_id, params)
    return run.info.run_id


def log_params(client, run_id: str, params: dict[str, Any]) -> None:
    """Log flattened params (secret-looking keys dropped, long values truncated) in batches."""
    from mlflow.entities import Param

    batch = [Param(mlflow_key(k), v) for k, v in sorted(safe_params(params).items())]
    for start in range(0, len(batch), 100):
        client.log_batch(run_id, params=batch[start : start + 100])


def log_metrics(client, run_id: str, metrics: dict[str, Any], step: int = 0) -> None:
    """Log the numeric entries of ``metrics`` at ``step``."""
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    numeric = {k: v for k, v in metrics.items() if not isinstance(v, bool)}
    batch = [Metric(mlflow_key(k), v, now, step) for k, v in finite_metrics(numeric).items()]
    for start in range(0, len(batch), 500):
        client.log_batch(run_id, metrics=batch[start : start + 500])


def epoch_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The per-epoch part of a trial result: loss, train seconds and ``valid/...`` metrics."""
    keep = ("loss", "train_seconds")
    return {k: v for k, v in result.items() if k in keep or k.startswith("valid/")}


def test_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The ``test/...`` metrics of a final trial result."""
    return {k: v for k, v in result.items() if k.startswith("test/")}


try:
    from ray.tune import Callback as _TuneCallback
except ImportError:  # pragma: no cover - ray[tune] is a core dependency
    _TuneCallback = object  # type: ignore[assignment,misc]


class MLflowTrialLogger(_TuneCallback):
    """Tune callback: one child run per trial under ``parent_run_id``.

    Picklable (it holds only ids and the URI), so ``Tuner.restore`` brings it back; after a
    restore a trial's child run is found again by its ``llmrec.trial_id`` tag.
    """

    def __init__(self, uri: str, exp_id: str, parent_run_id: str):
        self.uri, self.exp_id, self.parent_run_id = uri, exp_id, parent_run_id
        self._runs: dict[str, str] = {}
        self._client = None

    def __getstate__(self) -> dict:
        return {
            "uri": self.uri,
            "exp_id": self.exp_id,
            "parent_run_id": self.parent_run_id,
            "_runs": {},
            "_client": None,
        }

    @property
    def client(self):
        if self._client is None:
            self._client = client_for(self.uri)
        return self._client

    def run_for(self, trial) -> str:
        """The child run of ``trial``, created (with the trial's params) on first use."""
        if trial.trial_id in self._runs:
            return self._runs[trial.trial_id]
        found = self.client.search_runs(
            [self.exp_id],
            filter_string=f"tags.`{PARENT_TAG}` = '{self.parent_run_id}' and tags.`{TRIAL_TAG}` = '{trial.trial_id}'",
        )
        if found:
            run_id = found[0].info.run_id
        else:
            tags = {PARENT_TAG: self.parent_run_id, TRIAL_TAG: trial.trial_id}
            run_id = start_run(self.client, self.exp_id, f"trial-{trial.trial_id}", {}, tags)
            log_params(self.client, run_id, dict(trial.config or {}))
        self._runs[trial.trial_id] = run_id
        return run_id

    def on_trial_start(self, iteration, trials, trial, **info):
        self.run_for(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        run_id = self.run_for(trial)
        step = int(result.get("epoch", result.get("training_iteration", 0)))
        if any(k.startswith("test/") for k in result):
            log_metrics(self.client, run_id, test_metrics(result), step)
        else:
            log_metrics(self.client, run_id, epoch_metrics(result), step)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.client.set_terminated(self.run_for(trial), "FINISHED")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.client.set_terminated(self.run_for(trial), "FAILED")
