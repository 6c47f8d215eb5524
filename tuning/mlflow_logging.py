"""MLflow logging for training runs and sweeps (through ``llmrec.tracking``'s conventions).

A sweep is one parent run with one child run per trial (params = the trial's sampled
values and its full config; metrics = per-epoch validation metrics at ``step = epoch`` and
the final ``test/...`` metrics). Logging happens in the Tune driver through ``MLflowTrialLogger``
(a ``tune.Callback``), so a sqlite store has a single writer. Metric names are made
MLflow-safe by ``tracking.metric_key`` (``valid/ndcg@10`` -> ``valid/ndcg_at_10``), params go
through ``tracking.safe_params`` and runs carry ``tracking.run_tags`` — the same rules as
evaluation runs.
"""

from __future__ import annotations

import logging
from typing import Any

from llmrec import tracking
from llmrec.tracking import TAG_PARENT as PARENT_TAG

logger = logging.getLogger(__name__)
TRIAL_TAG = "llmrec.trial_id"
# what `llmrec runs` and the MLflow view show for baseline runs (test metrics of the trainer)
HEADLINE = ("test/ndcg@10", "test/hr@10", "test/mrr@10")


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
            self._client = tracking.client(self.uri)
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
            tags = tracking.run_tags("trial", headline=HEADLINE, **{PARENT_TAG: self.parent_run_id,
                                                                    TRIAL_TAG: trial.trial_id})
            run_id = tracking.start_run(self.client, self.exp_id, f"trial-{trial.trial_id}",
                                        dict(trial.config or {}), tags)
        self._runs[trial.trial_id] = run_id
        return run_id

    def on_trial_start(self, iteration, trials, trial, **info):
        self.run_for(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        run_id = self.run_for(trial)
        step = int(result.get("epoch", result.get("training_iteration", 0)))
        if any(k.startswith("test/") for k in result):
            tracking.log_metrics(self.client, run_id, test_metrics(result), step)
        else:
            tracking.log_metrics(self.client, run_id, epoch_metrics(result), step)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.client.set_terminated(self.run_for(trial), "FINISHED")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.client.set_terminated(self.run_for(trial), "FAILED")
