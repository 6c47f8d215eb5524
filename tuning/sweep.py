"""The one Ray Tune sweep of ``llmrec tune`` (baselines, ``tuning/api.py``) and ``llmrec sft`` with a
``tune:`` section (``tuning/sft/sweep.py``): search space, scheduler, Tuner, best result, the
``best.json`` summary and the MLflow parent run (one per sweep; trials are its children).

Each caller keeps what is its own: the trainable, its time unit (epochs or optimizer steps), where
files go, and what it adds to the summary (a baseline's best config file and test metrics, an SFT
sweep's best adapter).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import Field

from llmrec import tracking
from llmrec.config import StrictModel
from llmrec.errors import ConfigError

log = logging.getLogger(__name__)


def search_space(dims: dict, check: Callable[[str, Any], None]) -> dict:
    """Ray Tune domains of ``dims`` (dotted key → ``SearchDim``); ``check(key, value)`` validates a
    trial config holding an example value first, so a bad key fails before any trial runs."""
    space = {}
    for key, dim in dims.items():
        check(key, dim.example())
        space[key] = dim.domain()
    return space


class SchedulerConfig(StrictModel):
    """Trial scheduler of a sweep: ASHA stops poor trials early at rungs of the sweep's time unit (epochs for
    ``llmrec tune``, optimizer steps for ``llmrec sft``); FIFO runs every trial to its end."""

    type: Literal["asha", "fifo"] = Field("asha", description="asha stops poor trials early; fifo runs all")
    grace_period: int = Field(2, ge=1, description="ASHA: time units (tune: epochs; sft: optimizer steps) every "
                              "trial runs before it may be stopped")
    reduction_factor: float = Field(2.0, gt=1, description="ASHA: keep 1/reduction_factor of trials per rung")
    max_t: int | None = Field(None, ge=1, description="ASHA: the last rung (default: tune train.epochs; sft "
                              "unbounded)")

    def build(self, time_attr: str, default_max_t: int):
        """The Ray Tune scheduler, counting ``time_attr``."""
        from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

        if self.type == "fifo":
            return FIFOScheduler()
        return ASHAScheduler(time_attr=time_attr, max_t=self.max_t or default_max_t, grace_period=self.grace_period,
                             reduction_factor=self.reduction_factor)


def new_tuner(trainable, space: dict, *, metric: str, mode: str, scheduler_, num_samples: int, max_concurrent: int,
              seed: int | None, name: str, storage_path: str, callbacks: list, max_failures: int = 0):
    """A Tuner sampling ``space`` with a seeded basic-variant search (reproducible trial configs)."""
    from ray import tune

    return tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(metric=metric, mode=mode, scheduler=scheduler_, num_samples=num_samples,
                                    max_concurrent_trials=max_concurrent,
                                    search_alg=tune.search.BasicVariantGenerator(random_state=seed)),
        run_config=tune.RunConfig(name=name, storage_path=storage_path, callbacks=callbacks, verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=max_failures)),
    )


def best_result(grid, metric: str, mode: str, scope: str, where: str):
    """The best trial's result (``scope``: "all" reports or each trial's "last"); a failed trial is
    logged; no trial reporting ``metric`` is a ConfigError naming the sweep."""
    errors = [str(e) for e in grid.errors]
    for err in errors:
        log.warning("trial failed: %s", err.splitlines()[0] if err else err)
    try:
        return grid.get_best_result(metric=metric, mode=mode, scope=scope)
    except RuntimeError as e:
        raise ConfigError(f"no trial of the sweep at {where} reported {metric!r}; {len(errors)} trial(s) failed") from e


def summary(sweep_dir: str, metric: str, best_value, best, grid, parent: dict | None, **extra) -> dict:
    """What ``best.json`` holds: the best value and config, the caller's ``extra`` fields, trial and
    error counts, and the MLflow parent run."""
    return {"sweep_dir": sweep_dir, "metric": metric, "best_value": best_value, "best_config": dict(best.config),
            **extra, "n_trials": len(grid), "n_errors": len(grid.errors),
            "mlflow_parent_run_id": parent["run_id"] if parent else None}


def start_parent(tracking_cfg, headline: tuple[str, ...], kind: str, name: str, params: dict, protocol: dict,
                 data_fingerprint: str | None, run_dir: str) -> dict | None:
    """The sweep's MLflow parent run (``{"experiment_id", "run_id"}``), or None with tracking off."""
    if not tracking_cfg.enabled:
        return None
    client = tracking.client(tracking_cfg.uri)
    exp = tracking.ensure_experiment(client, tracking_cfg.experiment, tracking_cfg.artifact_root, headline)
    tags = tracking.run_tags(kind, protocol, data_fingerprint, headline, **{"llmrec.run_dir": run_dir})
    return {"experiment_id": exp, "run_id": tracking.start_run(client, exp, name, params, tags)}


def close_parent(uri: str | None, parent: dict | None, out: dict, metrics: dict, artifacts: list[Path],
                 tags: dict[str, str] | None = None) -> None:
    """Log the best metrics, tags and files to the parent run; it ends FAILED only when every trial
    failed (``out``: the summary)."""
    if not parent:
        return
    client, run_id = tracking.client(uri), parent["run_id"]
    tracking.log_metrics(client, run_id, metrics)
    for key, value in (tags or {}).items():
        client.set_tag(run_id, key, value)
    for path in artifacts:
        client.log_artifact(run_id, str(path))
    failed = out["n_trials"] > 0 and out["n_errors"] >= out["n_trials"]
    client.set_terminated(run_id, "FAILED" if failed else "FINISHED")
