"""``llmrec sft CONFIG.yaml`` with a ``tune:`` section: a Ray Tune sweep of SFT runs.

Each trial is a Tune function that runs one ``TorchTrainer`` (the same worker loop as a single
run) and forwards every reported step to Tune with ``TuneReportCallback``; ASHA stops poor
trials by ``tune.metric`` (default ``valid/loss``) with ``step`` as time. MLflow: one parent run
per sweep, one child per trial (``SFTTrialLogger``, in the Tune driver: a single writer),
per-step metrics at ``step``. Writes ``best.json`` (best trial's values, metric and adapter). The sweep
itself (scheduler, Tuner, best result, summary, parent run) is ``tuning/sweep.py``, shared with ``llmrec tune``.
"""

from __future__ import annotations

import json
import logging
import shutil
from functools import partial
from pathlib import Path

from llmrec.config import dump_yaml, validate
from llmrec.errors import ConfigError
from llmrec.tuning import sweep
from llmrec.tuning.config import set_path
from llmrec.tracking import log_metrics, tracking_uri
from llmrec.tuning.mlflow_logging import MLflowTrialLogger
from llmrec.ray_start import ray_session
from llmrec.rundir import RunWriter, dumps_json
from llmrec.tuning.sft.api import SFT_HEADLINE, run_dir, trainer_for
from llmrec.tuning.sft.config import SFTConfig, with_absolute_paths

log = logging.getLogger(__name__)
SFT_KEYS = ("loss", "lr", "step_time_s", "valid/loss", "epoch")


class SFTTrialLogger(MLflowTrialLogger):
    """Child run per trial; per-step SFT metrics at ``step``."""

    def on_trial_result(self, iteration, trials, trial, result, **info):
        run_id = self.run_for(trial)
        log_metrics(self.client, run_id, {k: result[k] for k in SFT_KEYS if k in result}, int(result.get("step", 0)))


def trial_config(base: dict, sampled: dict) -> SFTConfig:
    merged = base
    for key, value in sampled.items():
        merged = set_path(merged, key, value)
    return validate(SFTConfig, merged)


def sft_trial(config: dict, base: dict, model_dir: str, storage: str) -> None:
    """Tune function trainable: one Ray Train run with the sampled values."""
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback

    cfg = trial_config(base, config)
    name = f"trial-{tune.get_context().get_trial_id()}"
    trainer_for(cfg, Path(model_dir), Path(storage), name, [TuneReportCallback()]).fit()


def _check_trial(base: dict, key: str, value) -> None:
    try:
        trial_config(base, {key: value})
    except ConfigError as e:
        raise ConfigError(f"tune.search_space['{key}']: {e}") from e


def sweep_from_config(cfg: SFTConfig) -> dict:
    from ray import tune

    from llmrec.serving.hf_model import resolve_model_dir

    cfg = with_absolute_paths(cfg)
    out = run_dir(cfg)
    if (out / "best.json").is_file():
        raise ConfigError(f"a finished sweep exists at {out}; set output.run_name for a new one")
    out.mkdir(parents=True, exist_ok=True)
    RunWriter(out).write_config(dump_yaml(cfg))
    t, base = cfg.tune, cfg.model_dump(mode="json", exclude={"tune"})
    space = sweep.search_space(t.search_space, partial(_check_trial, base))
    model_dir, uri = resolve_model_dir(cfg.base_model), tracking_uri(cfg.tracking.uri)
    params = {**base, "search_space": json.dumps(t.model_dump(mode="json")["search_space"])}
    parent = sweep.start_parent(cfg.tracking, SFT_HEADLINE, "sft-tune", out.name, params, {"data": base.get("data")},
                                None, str(out))
    callbacks = [SFTTrialLogger(uri, parent["experiment_id"], parent["run_id"])] if parent else []
    scheduler = t.scheduler.build("step", 10**9)  # steps have no natural end: unbounded unless max_t is set
    with ray_session(cfg.ray.address, cfg.ray.num_cpus):
        trainable = tune.with_resources(tune.with_parameters(sft_trial, base=base, model_dir=str(model_dir),
                                                             storage=str(out / "trials")),
                                       # the trial only drives its trainer: no CPU of its own (Tune needs a
                                       # non-empty request, so a token of logical memory)
                                       {"cpu": 0, "memory": 64 * 2**20})
        grid = sweep.new_tuner(trainable, space, metric=t.metric, mode=t.mode, scheduler_=scheduler,
                               num_samples=t.num_samples, max_concurrent=t.max_concurrent, seed=t.seed, name="tune",
                               storage_path=str(out), callbacks=callbacks).fit()
        best = sweep.best_result(grid, t.metric, t.mode, "last", str(out))
    summary = sweep.summary(str(out), t.metric, (best.metrics or {}).get(t.metric), best, grid, parent)
    adapter = _best_adapter(best)
    if adapter is not None:
        shutil.rmtree(out / "best_adapter", ignore_errors=True)
        shutil.copytree(adapter, out / "best_adapter")
        summary["adapter"] = str(out / "best_adapter")
    (out / "best.json").write_text(dumps_json(summary), encoding="utf-8")
    sweep.close_parent(uri, parent, summary, {f"best/{t.metric}": summary["best_value"]}, [out / "best.json"])
    return summary


def _best_adapter(best) -> Path | None:
    """The adapter of the checkpoint in the best trial's last report (every run ends with one; a trial
    ASHA stopped early may not), from the path ``TuneReportCallback`` adds."""
    path = (best.metrics or {}).get("checkpoint_path")
    return Path(path) / "adapter" if path and (Path(path) / "adapter").is_dir() else None
