"""``llmrec sft CONFIG.yaml`` with a ``tune:`` section: a Ray Tune sweep of SFT runs.

Each trial is a Tune function that runs one ``TorchTrainer`` (the same worker loop as a single
run) and forwards every reported step to Tune with ``TuneReportCallback``; ASHA stops poor
trials by ``tune.metric`` (default ``valid/loss``) with ``step`` as time. MLflow: one parent run
per sweep, one child per trial (``SFTTrialLogger``, in the Tune driver: a single writer),
per-step metrics at ``step``. Writes ``best.json`` (best trial's values, metric and adapter).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from llmrec.config import dump_yaml, validate
from llmrec.errors import ConfigError
from llmrec.tuning.config import set_path
from llmrec import tracking
from llmrec.tracking import log_metrics, tracking_uri
from llmrec.tuning.mlflow_logging import MLflowTrialLogger
from llmrec.ray_start import start_ray
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


def _space(cfg: SFTConfig) -> dict:
    base = cfg.model_dump(mode="json", exclude={"tune"})
    space = {}
    for key, dim in cfg.tune.search_space.items():
        try:
            trial_config(base, {key: dim.example()})
        except ConfigError as e:
            raise ConfigError(f"tune.search_space['{key}']: {e}") from e
        space[key] = dim.domain()
    return space


def sweep_from_config(cfg: SFTConfig) -> dict:
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    from llmrec.serving.hf_model import resolve_model_dir

    cfg = with_absolute_paths(cfg)
    out = run_dir(cfg)
    if (out / "best.json").is_file():
        raise ConfigError(f"a finished sweep exists at {out}; set output.run_name for a new one")
    out.mkdir(parents=True, exist_ok=True)
    (out / "resolved.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
    t, base = cfg.tune, cfg.model_dump(mode="json", exclude={"tune"})
    space, model_dir = _space(cfg), resolve_model_dir(cfg.base_model)
    uri, parent = tracking_uri(cfg.tracking.uri), None
    callbacks = []
    if cfg.tracking.enabled:
        client = tracking.client(uri)
        exp = tracking.ensure_experiment(client, cfg.tracking.experiment, cfg.tracking.artifact_root, SFT_HEADLINE)
        params = {**base, "search_space": json.dumps(cfg.tune.model_dump(mode="json")["search_space"])}
        tags = tracking.run_tags("sft-tune", {"data": base.get("data")}, None, SFT_HEADLINE,
                                 **{"llmrec.run_dir": str(out)})
        parent = tracking.start_run(client, exp, out.name, params, tags)
        callbacks.append(SFTTrialLogger(uri, exp, parent))
    scheduler = FIFOScheduler() if t.scheduler.type == "fifo" else ASHAScheduler(
        time_attr="step", grace_period=t.scheduler.grace_period, reduction_factor=t.scheduler.reduction_factor,
        max_t=10**9)
    started = start_ray(cfg.ray.address, cfg.ray.num_cpus)
    try:
        trainable = tune.with_resources(tune.with_parameters(sft_trial, base=base, model_dir=str(model_dir),
                                                             storage=str(out / "trials")),
                                       # the trial only drives its trainer: no CPU of its own (Tune needs a
                                       # non-empty request, so a token of logical memory)
                                       {"cpu": 0, "memory": 64 * 2**20})
        grid = tune.Tuner(trainable, param_space=space, tune_config=tune.TuneConfig(
            metric=t.metric, mode=t.mode, scheduler=scheduler, num_samples=t.num_samples,
            max_concurrent_trials=t.max_concurrent, search_alg=tune.search.BasicVariantGenerator(random_state=t.seed)),
            run_config=tune.RunConfig(name="tune", storage_path=str(out), callbacks=callbacks, verbose=0)).fit()
        best = grid.get_best_result(metric=t.metric, mode=t.mode, scope="last")
    except RuntimeError as e:
        raise ConfigError(f"no trial of the sweep at {out} reported {t.metric!r}: {e}") from e
    finally:
        if started:
            import ray

            ray.shutdown()
    summary = {"sweep_dir": str(out), "metric": t.metric, "best_value": (best.metrics or {}).get(t.metric),
               "best_config": dict(best.config), "n_trials": len(grid), "n_errors": len(grid.errors),
               "mlflow_parent_run_id": parent}
    adapter = _best_adapter(best)
    if adapter is not None:
        shutil.rmtree(out / "best_adapter", ignore_errors=True)
        shutil.copytree(adapter, out / "best_adapter")
        summary["adapter"] = str(out / "best_adapter")
    (out / "best.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    if parent:
        client = tracking.client(uri)
        if summary["best_value"] is not None:
            log_metrics(client, parent, {f"best/{t.metric}": summary["best_value"]})
        client.log_artifact(parent, str(out / "best.json"))
        client.set_terminated(parent, "FINISHED" if len(grid.errors) < len(grid) else "FAILED")
    return summary


def _best_adapter(best) -> Path | None:
    """The adapter of the checkpoint in the best trial's last report (every run ends with one; a trial
    ASHA stopped early may not), from the path ``TuneReportCallback`` adds."""
    path = (best.metrics or {}).get("checkpoint_path")
    return Path(path) / "adapter" if path and (Path(path) / "adapter").is_dir() else None
