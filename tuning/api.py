"""The two entry points the CLI calls: ``train_from_config`` and ``tune_from_config``.

``llmrec train CONFIG.yaml [--set k=v ...]`` -> ``train_from_config(path, overrides)``;
``llmrec tune CONFIG.yaml [--resume]`` -> ``tune_from_config(path, overrides, resume)``.
Relative data paths resolve against ``data.dir`` / ``$LLMREC_DATA_DIR`` (a CLI ``--data-dir``
maps to ``--set data.dir=...``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml

from llmrec import storage
from llmrec.config import dump_yaml, fingerprint, load_config, semantic_conflicts, validate
from llmrec.errors import ConfigError, DataError
from llmrec.rundir import RunDir, dumps_json
from llmrec.models.export import candidate_lists, export_embeddings, topk_frame
from llmrec.models.trainer import CHECKPOINT, LAST
from llmrec.redact import redacted
from llmrec.ray_start import ray_session
from llmrec.tuning import sweep as sweep_
from llmrec.tuning.config import TrainConfig, TuneConfig, set_path
from llmrec import tracking
from llmrec.tracking import log_metrics, tracking_uri
from llmrec.tuning.mlflow_logging import HEADLINE, MLflowTrialLogger, epoch_metrics
from llmrec.tuning.run_files import RunFiles
from llmrec.tuning.trainable import prepare_data, train_and_test, tune_trial

logger = logging.getLogger(__name__)


def _absolute(cfg: TrainConfig) -> TrainConfig:
    """``output.dir`` made absolute here, on the driver (a URI is kept), as its recorded config (``RunDir.CONFIG``) holds it."""
    return cfg.model_copy(update={"output": cfg.output.model_copy(update={"dir": storage.resolve(cfg.output.dir)})})


def _run_files(cfg: TrainConfig, kind: str) -> RunFiles:
    """The run (or sweep) directory: ``output.dir`` (a local folder, made absolute here on the
    driver, or a storage URI) / ``output.run_name`` (default ``<kind>-<model>-<config hash>``)."""
    name = cfg.output.run_name or f"{kind}-{cfg.model.name}-{fingerprint(cfg.semantic())}"
    return RunFiles(storage.resolve(cfg.output.dir), name)


def train_from_config(path: str, overrides: list[str], resume: bool = False, fresh: bool = False) -> dict:
    """Train one configuration; returns metrics, best epoch and the locations written.

    ``resume`` continues an interrupted run of the same config from ``checkpoint/last.pt``
    (after its last validated epoch, with optimizer, early-stopping counters and RNG state); it is
    refused when the run directory's config differs in a key that determines the result. Without
    ``resume``, a run directory that already holds a checkpoint or metrics is refused, unless
    ``fresh`` (which discards them first).

    Writes the config, ``protocol.json``, the metrics (``RunDir``'s names), ``checkpoint/best.pt``,
    ``per_user_test.parquet``, ``topk_test.parquet`` and embeddings under the run directory
    (a local folder or a storage URI: see ``run_files``), and logs one MLflow run (params,
    per-epoch validation metrics, test metrics).
    """
    cfg = _absolute(load_config(TrainConfig, path, overrides))
    files = _run_files(cfg, "train")
    try:
        check_existing_run(cfg, files, resume, fresh)
        return _train(cfg, files, resume)
    finally:
        files.close()


TRAINED = (f"checkpoint/{CHECKPOINT}", f"checkpoint/{LAST}", RunDir.METRICS)  # what a (partly) trained run holds
# keys a resumed run may change: more epochs continue the same trajectory an uninterrupted run would have taken
RESUMABLE_CHANGES = ("train.epochs:",)


def check_existing_run(cfg: TrainConfig, files: RunFiles, resume: bool, fresh: bool) -> None:
    """A run directory's checkpoint and metrics belong to the config that made them: ``resume`` continues only
    under that config (the differing keys are named otherwise); a new run never writes over them (``fresh``
    discards them first)."""
    if resume and fresh:
        raise ConfigError("--resume and --fresh contradict each other: pick one")
    held = [rel for rel in TRAINED if files.exists(rel)]
    if fresh:
        for rel in held:
            folder, _, name = rel.rpartition("/")
            (files.store / folder if folder else files.store).delete(name)
        return
    if held and not resume:
        raise ConfigError(f"{files.uri} already holds a trained run ({', '.join(held)}): use --resume to continue "
                          "it, --fresh to discard it and train again, or another output.run_name")
    if not resume or not any(rel.startswith("checkpoint/") for rel in held):
        return  # nothing to continue: _train says so
    stored_dir = files.run_dir
    if not stored_dir.has_config():
        raise ConfigError(f"--resume: {files.uri} has no {RunDir.CONFIG}, so nothing says which config its "
                          "checkpoint was trained under; use --fresh to train again")
    try:
        stored = stored_dir.config()
    except DataError as e:
        raise ConfigError(f"--resume: {e}") from None
    differ = [d for d in semantic_conflicts(redacted(cfg.semantic()), stored if isinstance(stored, dict) else {})
              if not d.startswith(RESUMABLE_CHANGES)]
    if differ:
        raise ConfigError(f"--resume: the checkpoint in {files.uri} was trained under a different config, so it "
                          "is not continued:\n  " + "\n  ".join(differ) + "\nUse --fresh to discard it and train "
                          "again, or give this config another output.run_name")


def _train(cfg: TrainConfig, files: RunFiles, resume: bool) -> dict:
    ckpt_dir = files.work / "checkpoint"
    if resume and not files.fetch_checkpoint():
        raise ConfigError(f"--resume: no checkpoint of this config at {files.location('checkpoint')}")
    files.write_config(dump_yaml(cfg))
    data = prepare_data(cfg)
    files.write_protocol(data.protocol)
    client = run_id = None
    if cfg.tracking.enabled:
        client = tracking.client(cfg.tracking.uri)
        exp = tracking.ensure_experiment(client, cfg.tracking.experiment, cfg.tracking.artifact_root, HEADLINE)
        params = {
            **cfg.model_dump(mode="json", exclude={"tracking", "output"}),
            "protocol": _protocol_params(data.protocol),
        }
        extra = {"llmrec.run_dir": files.uri, **({"llmrec.resumed": "true"} if resume else {})}
        tags = tracking.run_tags("train", data.protocol, _data_fingerprint(data.protocol), HEADLINE, **extra)
        run_id = tracking.start_run(client, exp, files.name, params, tags)

    def on_epoch(row: dict, ckpt: Path | None) -> None:
        files.publish_checkpoint(new_best=ckpt is not None)
        if client is not None:
            log_metrics(client, run_id, epoch_metrics(row), int(row["epoch"]))

    try:
        model, result, test = train_and_test(cfg, data, ckpt_dir, on_epoch, ckpt_dir if resume else None)
    except BaseException:
        if client is not None:
            client.set_terminated(run_id, "FAILED")
        raise
    out = _write_outputs(cfg, files, data, model, result, test)
    out["mlflow_run_id"] = run_id
    files.write_metrics(out)  # last: the run is complete
    if client is not None:
        log_metrics(client, run_id, {**out["test"], "best_epoch": result.best_epoch}, result.best_epoch)
        for name in (RunDir.CONFIG, RunDir.PROTOCOL, RunDir.METRICS):
            client.log_artifact(run_id, str(files.file(name)))
        client.set_terminated(run_id, "FINISHED")
    logger.info(
        "trained %s: best epoch %d, test %s",
        cfg.model.name,
        result.best_epoch,
        {k: round(v, 4) for k, v in out["test"].items() if k.endswith("@10")},
    )
    return out


def _write_outputs(cfg: TrainConfig, files: RunFiles, data, model, result, test) -> dict[str, Any]:
    """Per-user metrics, candidate lists, top-K and embeddings, made in the working folder and
    published; returns the report (locations are the run directory's)."""
    out: dict[str, Any] = {
        "run_dir": files.uri,
        "best_epoch": result.best_epoch,
        "valid": result.best_valid,
        "test": {f"test/{k}": v for k, v in test.metrics.items()},
        "train_seconds_per_epoch": result.train_seconds_per_epoch,
        "checkpoint": files.location(f"checkpoint/{CHECKPOINT}") if result.checkpoint else None,
        "protocol": data.protocol,
    }
    test.per_user.to_parquet(files.work / "per_user_test.parquet", index=False)
    for phase in ("valid", "test"):
        frame = candidate_lists(data, phase)
        if frame is not None:
            frame.to_parquet(files.work / f"candidates_{phase}.parquet", index=False)
            out[f"candidates_{phase}"] = files.location(f"candidates_{phase}.parquet")
    if cfg.output.export_topk:
        topk_frame(data, test).to_parquet(files.work / "topk_test.parquet", index=False)
        out["topk"] = files.location("topk_test.parquet")
    if cfg.output.export_embeddings:
        written = export_embeddings(model, data, files.work / "embeddings")
        out["embeddings"] = {k: files.location(f"embeddings/{Path(v).name}") for k, v in written.items()}
    files.publish_all(last=RunDir.METRICS, skip=("checkpoint",))
    return out


def _data_fingerprint(protocol: dict) -> str:
    """What identifies the evaluation data of a baseline run: the data spec, filters and split."""
    return fingerprint({k: protocol.get(k) for k in sorted(protocol) if k != "model"}, 16)


def _protocol_params(protocol: dict) -> dict:
    return {k: v for k, v in protocol.items() if k not in ("filters",)}


def _search_space(cfg: TuneConfig) -> dict:
    base = cfg.train_config()
    return sweep_.search_space(cfg.tune.search_space,
                               lambda key, value: validate(TrainConfig, set_path(base, key, value), prefix=""))


def _scheduler(cfg: TuneConfig):
    sch = cfg.tune.scheduler
    # +1: the final report of a trial carries its test metrics and must not be cut off.
    return sch.build("epoch", cfg.train.epochs + 1)


def tune_from_config(path: str, overrides: list[str], resume: bool = False) -> dict:
    """Run (or, with ``resume``, continue via ``Tuner.restore``) a Ray Tune sweep.

    One MLflow parent run per sweep, one child per trial. Writes ``best.yaml`` (a train
    config reproducing the best trial) and ``best.json`` (its metrics and checkpoint) to the
    sweep directory (a local folder or a storage URI); returns the same information.
    """
    from llmrec.models.trainer import metric_names

    cfg = _absolute(load_config(TuneConfig, path, overrides))
    metric = f"valid/{cfg.tune.metric or cfg.train.metric}"

    if metric.removeprefix("valid/") not in metric_names(cfg.train.eval):
        raise ConfigError(
            f"tune.metric={metric!r} is not computed; available: {', '.join(metric_names(cfg.train.eval))}"
        )
    space = _search_space(cfg)
    sweep = _run_files(cfg, "tune")
    try:
        return _sweep(cfg, sweep, metric, space, resume)
    finally:
        sweep.close()


def _sweep(cfg: TuneConfig, sweep: RunFiles, metric: str, space: dict, resume: bool) -> dict:
    import ray
    from ray import tune

    # Tune's own state (experiment + trial checkpoints): local or a storage URI; by default in the
    # sweep directory itself (output.dir/<name>, local or a URI), beside llmrec's files
    tune_root = storage.resolve(cfg.tune.storage_path) if cfg.tune.storage_path else storage.resolve(cfg.output.dir)
    tune_dir = storage.Storage(tune_root) / sweep.name
    exists = tune_dir.exists("tuner.pkl")
    if resume and not exists:
        raise ConfigError(f"--resume: no sweep to resume at {tune_dir}")
    if not resume and exists:
        raise ConfigError(f"a sweep already exists at {sweep.uri}; pass --resume to continue it or set output.run_name")
    sweep.write_config(dump_yaml(cfg))
    with ray_session(cfg.tune.ray_address, cfg.tune.num_cpus):
        data = prepare_data(cfg)
        base = cfg.train_config()
        uri, parent = tracking_uri(cfg.tracking.uri), _parent_run(cfg, sweep, data.protocol, resume)
        res = cfg.tune.resources_per_trial
        concurrency = cfg.tune.max_concurrent or fit_concurrency(ray.cluster_resources(), res.cpu, res.gpu)
        logger.info("sweep %s: up to %d trial(s) at once", sweep.name, concurrency)
        trainable = tune.with_resources(
            tune.with_parameters(tune_trial, base=base, data=data, trials=sweep.location("trials")),
            {"cpu": res.cpu, "gpu": res.gpu},
        )
        if resume:
            tuner = tune.Tuner.restore(tune_dir.uri, trainable=trainable, resume_unfinished=True,
                                       resume_errored=True)
        else:
            callbacks = [MLflowTrialLogger(uri, parent["experiment_id"], parent["run_id"])] if parent else []
            tuner = sweep_.new_tuner(trainable, space, metric=metric, mode=cfg.tune.mode, scheduler_=_scheduler(cfg),
                                     num_samples=cfg.tune.num_samples, max_concurrent=concurrency,
                                     seed=cfg.tune.seed, name=sweep.name, storage_path=tune_root,
                                     callbacks=callbacks, max_failures=cfg.tune.max_failures)
        grid = tuner.fit()
        return _finish_sweep(cfg, grid, metric, sweep, base, parent)


def fit_concurrency(cluster: dict[str, float], cpu: float, gpu: float) -> int:
    """How many trials of ``cpu`` CPUs and ``gpu`` GPUs the cluster's resources hold at once (>= 1)."""
    fits = [int(cluster.get("CPU", 0) // cpu)]
    if gpu > 0:
        fits.append(int(cluster.get("GPU", 0) // gpu))
    return max(1, min(fits))


def _parent_run(cfg: TuneConfig, sweep: RunFiles, protocol: dict, resume: bool) -> dict | None:
    """Create (or, on resume, reload from ``sweep.json``) the sweep's MLflow parent run."""
    if resume and sweep.exists("sweep.json"):
        return json.loads(sweep.read_text("sweep.json")).get("parent")
    params = {
        **cfg.model_dump(mode="json", exclude={"tracking", "output", "tune"}),
        "protocol": _protocol_params(protocol),
        "tune": cfg.tune.model_dump(mode="json", exclude={"search_space"}),
        "search_space": json.dumps(cfg.tune.model_dump(mode="json")["search_space"]),
    }
    parent = sweep_.start_parent(cfg.tracking, HEADLINE, "tune", sweep.name, params, protocol,
                                 _data_fingerprint(protocol), sweep.uri)
    if parent:
        sweep.write_text("sweep.json", json.dumps({"parent": parent}, indent=2))
    return parent


def _finish_sweep(cfg: TuneConfig, grid, metric: str, sweep: RunFiles, base: dict, parent: dict | None) -> dict:
    best = sweep_.best_result(grid, metric, cfg.tune.mode, "all", sweep.uri)
    best_cfg = base
    for key, value in best.config.items():
        best_cfg = set_path(best_cfg, key, value)
    best_cfg = validate(TrainConfig, best_cfg).model_dump(mode="json")
    sweep.write_text("best.yaml", yaml.safe_dump(best_cfg, sort_keys=False))
    final = best.metrics or {}
    values = best.metrics_dataframe[metric]
    out = sweep_.summary(
        sweep.uri, metric, values.max() if cfg.tune.mode == "max" else values.min(), best, grid, parent,
        best_config_path=sweep.location("best.yaml"),
        checkpoint=sweep.location(f"trials/{final['trial_id']}/checkpoint/{CHECKPOINT}")
        if final.get("trial_id") else None,
        test={k: v for k, v in final.items() if k.startswith("test/")},
    )
    sweep.write_text("best.json", dumps_json(out))
    sweep_.close_parent(cfg.tracking.uri, parent, out,
                        {f"best/{metric}": float(out["best_value"]), **{f"best/{k}": v for k, v in out["test"].items()}},
                        [sweep.work / "best.yaml", sweep.work / "best.json"], {"llmrec.best_trial": best.path})
    logger.info("sweep %s: best %s = %.4f", sweep.name, metric, out["best_value"])
    return out
