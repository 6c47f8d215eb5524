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

from llmrec.config import dump_yaml, fingerprint, load_config, validate
from llmrec.errors import ConfigError
from llmrec.models.export import candidate_lists, export_embeddings, topk_frame
from llmrec.tuning.config import TrainConfig, TuneConfig, set_path
from llmrec import tracking
from llmrec.tracking import log_metrics, tracking_uri
from llmrec.tuning.mlflow_logging import HEADLINE, MLflowTrialLogger, epoch_metrics
from llmrec.tuning.trainable import prepare_data, train_and_test, tune_trial

logger = logging.getLogger(__name__)


def _run_dir(cfg: TrainConfig, kind: str) -> Path:
    name = cfg.output.run_name or f"{kind}-{cfg.model.name}-{fingerprint(cfg.semantic())}"
    return Path(cfg.output.dir).expanduser().resolve() / name


def train_from_config(path: str, overrides: list[str], resume: bool = False) -> dict:
    """Train one configuration; returns metrics, best epoch and the paths written.

    ``resume`` continues an interrupted run of the same config from ``checkpoint/last.pt``
    (after its last validated epoch, with optimizer, early-stopping counters and RNG state).

    Writes ``resolved.yaml``, ``protocol.json``, ``metrics.json``, ``checkpoint/best.pt``,
    ``per_user_test.parquet``, ``topk_test.parquet`` and embeddings under the run directory,
    and logs one MLflow run (params, per-epoch validation metrics, test metrics).
    """
    cfg = load_config(TrainConfig, path, overrides)
    run_dir = _run_dir(cfg, "train")
    ckpt_dir = run_dir / "checkpoint"
    if resume and not any((ckpt_dir / n).is_file() for n in ("last.pt", "best.pt")):
        raise ConfigError(f"--resume: no checkpoint of this config at {ckpt_dir}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "resolved.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
    data = prepare_data(cfg)
    (run_dir / "protocol.json").write_text(json.dumps(data.protocol, indent=2, default=str), encoding="utf-8")
    client = run_id = None
    if cfg.tracking.enabled:
        client = tracking.client(cfg.tracking.uri)
        exp = tracking.ensure_experiment(client, cfg.tracking.experiment, cfg.tracking.artifact_root, HEADLINE)
        params = {
            **cfg.model_dump(mode="json", exclude={"tracking", "output"}),
            "protocol": _protocol_params(data.protocol),
        }
        extra = {"llmrec.run_dir": str(run_dir), **({"llmrec.resumed": "true"} if resume else {})}
        tags = tracking.run_tags("train", data.protocol, _data_fingerprint(data.protocol), HEADLINE, **extra)
        run_id = tracking.start_run(client, exp, run_dir.name, params, tags)

    def on_epoch(row: dict, ckpt: Path | None) -> None:
        if client is not None:
            log_metrics(client, run_id, epoch_metrics(row), int(row["epoch"]))

    try:
        model, result, test = train_and_test(cfg, data, ckpt_dir, on_epoch, ckpt_dir if resume else None)
    except BaseException:
        if client is not None:
            client.set_terminated(run_id, "FAILED")
        raise
    test_metrics = {f"test/{k}": v for k, v in test.metrics.items()}
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "best_epoch": result.best_epoch,
        "valid": result.best_valid,
        "test": test_metrics,
        "train_seconds_per_epoch": result.train_seconds_per_epoch,
        "checkpoint": str(result.checkpoint),
        "protocol": data.protocol,
        "mlflow_run_id": run_id,
    }
    test.per_user.to_parquet(run_dir / "per_user_test.parquet", index=False)
    for phase in ("valid", "test"):
        frame = candidate_lists(data, phase)
        if frame is not None:
            frame.to_parquet(run_dir / f"candidates_{phase}.parquet", index=False)
            out[f"candidates_{phase}"] = str(run_dir / f"candidates_{phase}.parquet")
    if cfg.output.export_topk:
        topk_frame(data, test).to_parquet(run_dir / "topk_test.parquet", index=False)
        out["topk"] = str(run_dir / "topk_test.parquet")
    if cfg.output.export_embeddings:
        out["embeddings"] = {k: str(v) for k, v in export_embeddings(model, data, run_dir / "embeddings").items()}
    (run_dir / "metrics.json").write_text(json.dumps(out, indent=2, default=str), encoding="utf-8")
    if client is not None:
        log_metrics(client, run_id, {**test_metrics, "best_epoch": result.best_epoch}, result.best_epoch)
        for name in ("resolved.yaml", "protocol.json", "metrics.json"):
            client.log_artifact(run_id, str(run_dir / name))
        client.set_terminated(run_id, "FINISHED")
    logger.info(
        "trained %s: best epoch %d, test %s",
        cfg.model.name,
        result.best_epoch,
        {k: round(v, 4) for k, v in test_metrics.items() if k.endswith("@10")},
    )
    return out


def _data_fingerprint(protocol: dict) -> str:
    """What identifies the evaluation data of a baseline run: the data spec, filters and split."""
    return fingerprint({k: protocol.get(k) for k in sorted(protocol) if k != "model"}, 16)


def _protocol_params(protocol: dict) -> dict:
    return {k: v for k, v in protocol.items() if k not in ("filters",)}


def _search_space(cfg: TuneConfig) -> dict:
    space = {}
    base = cfg.train_config()
    for key, dim in cfg.tune.search_space.items():
        validate(TrainConfig, set_path(base, key, dim.example()), prefix="")
        space[key] = dim.domain()
    return space


def _scheduler(cfg: TuneConfig):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    sch = cfg.tune.scheduler
    if sch.type == "fifo":
        return FIFOScheduler()
    # +1: the final report of a trial carries its test metrics and must not be cut off.
    return ASHAScheduler(
        time_attr="epoch",
        max_t=sch.max_t or cfg.train.epochs + 1,
        grace_period=sch.grace_period,
        reduction_factor=sch.reduction_factor,
    )


def tune_from_config(path: str, overrides: list[str], resume: bool = False) -> dict:
    """Run (or, with ``resume``, continue via ``Tuner.restore``) a Ray Tune sweep.

    One MLflow parent run per sweep, one child per trial. Writes ``best.yaml`` (a train
    config reproducing the best trial) and ``best.json`` (its metrics and checkpoint) to the
    sweep directory; returns the same information.
    """
    import ray
    from ray import tune

    cfg = load_config(TuneConfig, path, overrides)
    sweep_dir = _run_dir(cfg, "tune")
    metric = f"valid/{cfg.tune.metric or cfg.train.metric}"
    from llmrec.models.trainer import metric_names

    if metric.removeprefix("valid/") not in metric_names(cfg.train.eval):
        raise ConfigError(
            f"tune.metric={metric!r} is not computed; available: {', '.join(metric_names(cfg.train.eval))}"
        )
    space = _search_space(cfg)
    from llmrec import storage

    # Tune's own state (experiment + trial checkpoints): local or a storage URI; llmrec's files stay in sweep_dir
    tune_root = storage.resolve(cfg.tune.storage_path) if cfg.tune.storage_path else str(sweep_dir.parent)
    tune_dir = storage.Storage(tune_root) / sweep_dir.name
    exists = tune_dir.exists("tuner.pkl")
    if resume and not exists:
        raise ConfigError(f"--resume: no sweep to resume at {tune_dir}")
    if not resume and exists:
        raise ConfigError(f"a sweep already exists at {sweep_dir}; pass --resume to continue it or set output.run_name")
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "resolved.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
    started = False
    if not ray.is_initialized():
        kwargs = {"num_cpus": cfg.tune.num_cpus} if cfg.tune.ray_address is None else {}
        ray.init(address=cfg.tune.ray_address, include_dashboard=False, configure_logging=False, **kwargs)
        started = True
    try:
        data = prepare_data(cfg)
        base = cfg.train_config()
        uri, parent = tracking_uri(cfg.tracking.uri), _parent_run(cfg, sweep_dir, data.protocol, resume)
        res = cfg.tune.resources_per_trial
        concurrency = cfg.tune.max_concurrent or fit_concurrency(ray.cluster_resources(), res.cpu, res.gpu)
        logger.info("sweep %s: up to %d trial(s) at once", sweep_dir.name, concurrency)
        trainable = tune.with_resources(
            tune.with_parameters(tune_trial, base=base, data=data), {"cpu": res.cpu, "gpu": res.gpu}
        )
        if resume:
            tuner = tune.Tuner.restore(tune_dir.uri, trainable=trainable, resume_unfinished=True,
                                       resume_errored=True)
        else:
            callbacks = [MLflowTrialLogger(uri, parent["experiment_id"], parent["run_id"])] if parent else []
            tuner = tune.Tuner(
                trainable,
                param_space=space,
                tune_config=tune.TuneConfig(
                    metric=metric,
                    mode=cfg.tune.mode,
                    scheduler=_scheduler(cfg),
                    num_samples=cfg.tune.num_samples,
                    max_concurrent_trials=concurrency,
                    search_alg=tune.search.BasicVariantGenerator(random_state=cfg.tune.seed),
                ),
                run_config=tune.RunConfig(
                    name=sweep_dir.name,
                    storage_path=tune_root,
                    callbacks=callbacks,
                    verbose=0,
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                    failure_config=tune.FailureConfig(max_failures=cfg.tune.max_failures),
                ),
            )
        grid = tuner.fit()
        return _finish_sweep(cfg, grid, metric, sweep_dir, base, parent)
    finally:
        if started:
            ray.shutdown()


def fit_concurrency(cluster: dict[str, float], cpu: float, gpu: float) -> int:
    """How many trials of ``cpu`` CPUs and ``gpu`` GPUs the cluster's resources hold at once (>= 1)."""
    fits = [int(cluster.get("CPU", 0) // cpu)]
    if gpu > 0:
        fits.append(int(cluster.get("GPU", 0) // gpu))
    return max(1, min(fits))


def _parent_run(cfg: TuneConfig, sweep_dir: Path, protocol: dict, resume: bool) -> dict | None:
    """Create (or, on resume, reload from ``sweep.json``) the sweep's MLflow parent run."""
    state = sweep_dir / "sweep.json"
    if resume and state.is_file():
        return json.loads(state.read_text(encoding="utf-8")).get("parent")
    if not cfg.tracking.enabled:
        return None
    client = tracking.client(cfg.tracking.uri)
    exp = tracking.ensure_experiment(client, cfg.tracking.experiment, cfg.tracking.artifact_root, HEADLINE)
    params = {
        **cfg.model_dump(mode="json", exclude={"tracking", "output", "tune"}),
        "protocol": _protocol_params(protocol),
        "tune": cfg.tune.model_dump(mode="json", exclude={"search_space"}),
        "search_space": json.dumps(cfg.tune.model_dump(mode="json")["search_space"]),
    }
    tags = tracking.run_tags("tune", protocol, _data_fingerprint(protocol), HEADLINE,
                             **{"llmrec.run_dir": str(sweep_dir)})
    run_id = tracking.start_run(client, exp, sweep_dir.name, params, tags)
    parent = {"experiment_id": exp, "run_id": run_id}
    state.write_text(json.dumps({"parent": parent}, indent=2), encoding="utf-8")
    return parent


def _finish_sweep(cfg: TuneConfig, grid, metric: str, sweep_dir: Path, base: dict, parent: dict | None) -> dict:
    errors = [str(e) for e in grid.errors]
    for err in errors:
        logger.warning("trial failed: %s", err.splitlines()[0] if err else err)
    try:
        best = grid.get_best_result(metric=metric, mode=cfg.tune.mode, scope="all")
    except RuntimeError as e:
        raise ConfigError(
            f"no trial of the sweep at {sweep_dir} reported {metric!r}; {len(errors)} trial(s) failed"
        ) from e
    best_cfg = base
    for key, value in best.config.items():
        best_cfg = set_path(best_cfg, key, value)
    best_cfg = validate(TrainConfig, best_cfg).model_dump(mode="json")
    (sweep_dir / "best.yaml").write_text(yaml.safe_dump(best_cfg, sort_keys=False), encoding="utf-8")
    final = best.metrics or {}
    out = {
        "sweep_dir": str(sweep_dir),
        "metric": metric,
        "best_value": best.metrics_dataframe[metric].max()
        if cfg.tune.mode == "max"
        else best.metrics_dataframe[metric].min(),
        "best_config": dict(best.config),
        "best_config_path": str(sweep_dir / "best.yaml"),
        "checkpoint": best.checkpoint.path if best.checkpoint else None,
        "test": {k: v for k, v in final.items() if k.startswith("test/")},
        "n_trials": len(grid),
        "n_errors": len(errors),
        "mlflow_parent_run_id": parent["run_id"] if parent else None,
    }
    (sweep_dir / "best.json").write_text(json.dumps(out, indent=2, default=str), encoding="utf-8")
    if parent:
        client = tracking.client(cfg.tracking.uri)
        log_metrics(
            client,
            parent["run_id"],
            {f"best/{metric}": float(out["best_value"]), **{f"best/{k}": v for k, v in out["test"].items()}},
        )
        client.set_tag(parent["run_id"], "llmrec.best_trial", best.path)
        client.log_artifact(parent["run_id"], str(sweep_dir / "best.yaml"))
        client.log_artifact(parent["run_id"], str(sweep_dir / "best.json"))
        client.set_terminated(parent["run_id"], "FAILED" if errors and len(errors) == len(grid) else "FINISHED")
    logger.info("sweep %s: best %s = %.4f", sweep_dir.name, metric, out["best_value"])
    return out
