"""``llmrec sft CONFIG.yaml``: one LoRA adapter as a Ray Train job (``TorchTrainer``), or a Ray Tune sweep.

Run directory = ``output.dir / run_name`` (the Ray Train ``storage_path`` / ``name``): Ray Train's
checkpoints, the config, and at the end ``adapter/`` (the final peft adapter) and the metrics (file names:
``llmrec.rundir.RunDir``). Rerunning the same config (same run name) after a kill resumes from the
last checkpoint, in the same MLflow run. MLflow: the Train controller logs every reported
step (``loss``, ``lr``, ``step_time_s``, ``valid/loss``) through ``MLflowStepLogger``, so a
sqlite store has a single writer.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

from llmrec.config import dump_yaml, fingerprint
from llmrec.ray_start import ray_session
from llmrec.rundir import RunDir, RunWriter
from llmrec import tracking
from llmrec.tracking import log_metrics, log_params
from llmrec.tuning.sft.config import SFTConfig, with_absolute_paths

log = logging.getLogger(__name__)
STATE_FILE = "mlflow_run.json"
SFT_HEADLINE = ("valid/loss", "loss")  # what `llmrec runs` and the MLflow view show for SFT runs

try:
    from ray.train import UserCallback as _UserCallback
except ImportError:  # pragma: no cover - ray[train] comes with ray[tune]
    _UserCallback = object  # type: ignore[assignment,misc]


class MLflowStepLogger(_UserCallback):
    """Ray Train controller callback: rank 0's reported metrics → the MLflow run, at ``step``."""

    def __init__(self, uri: str, run_id: str):
        self.uri, self.run_id, self._client = uri, run_id, None

    def __getstate__(self) -> dict:
        return {"uri": self.uri, "run_id": self.run_id, "_client": None}

    def after_report(self, run_context, metrics, checkpoint) -> None:
        if self._client is None:
            self._client = tracking.client(self.uri)
        row = metrics[0]
        log_metrics(self._client, self.run_id, {k: v for k, v in row.items() if k != "step"}, int(row["step"]))


def run_dir(cfg: SFTConfig) -> Path:
    name = cfg.output.run_name or f"sft-{fingerprint(cfg.semantic())}"
    return Path(cfg.output.dir).expanduser().resolve() / name


def manifest_path(cfg: SFTConfig) -> Path | None:
    if cfg.data.manifest is not None:
        return Path(cfg.data.manifest)
    for cand in (Path(cfg.data.train).parent / "manifest.json", Path(cfg.data.train).parent.parent / "manifest.json"):
        if cand.is_file():
            return cand
    return None


def _mlflow_run(cfg: SFTConfig, out: Path) -> str | None:
    """The run's MLflow run: reused when resuming (its id is kept in the run directory)."""
    if not cfg.tracking.enabled:
        return None
    state = out / STATE_FILE
    if state.is_file():
        return json.loads(state.read_text())["run_id"]
    client = tracking.client(cfg.tracking.uri)
    exp = tracking.ensure_experiment(client, cfg.tracking.experiment, cfg.tracking.artifact_root, SFT_HEADLINE)
    data = cfg.model_dump(mode="json").get("data", {})
    tags = tracking.run_tags("sft", {"data": data, "lora": cfg.model_dump(mode="json").get("lora")},
                             fingerprint(data, 16), SFT_HEADLINE, **{"llmrec.run_dir": str(out)})
    run_id = tracking.start_run(client, exp, out.name, cfg.model_dump(mode="json", exclude={"tracking", "tune"}), tags)
    man = manifest_path(cfg)
    if man is not None:
        client.log_artifact(run_id, str(man))
        heldout = json.loads(man.read_text()).get("test_topics")
        if heldout:
            log_params(client, run_id, {"data.heldout_topics": ",".join(heldout)})
    state.write_text(json.dumps({"run_id": run_id}))
    return run_id


def trainer_for(cfg: SFTConfig, model_dir: Path, storage: Path, name: str, callbacks: list):
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from llmrec.tuning.sft.loop import train_loop

    s = cfg.scaling
    return TorchTrainer(
        train_loop,
        train_loop_config={"sft": cfg.model_dump(mode="json"), "model_dir": str(model_dir)},
        scaling_config=ScalingConfig(num_workers=s.num_workers, use_gpu=s.use_gpu,
                                     resources_per_worker={"CPU": s.cpus_per_worker, **({"GPU": 1} if s.use_gpu else {})}),
        run_config=RunConfig(name=name, storage_path=str(storage), callbacks=callbacks,
                             failure_config=FailureConfig(max_failures=s.max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)),
    )


def sft_from_config(cfg: SFTConfig) -> dict:
    """Train one adapter; returns (and writes to the run directory's metrics file) the final metrics and paths."""
    from llmrec.serving.hf_model import resolve_model_dir

    cfg = with_absolute_paths(cfg)
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    RunWriter(out).write_config(dump_yaml(cfg))
    model_dir = resolve_model_dir(cfg.base_model)
    uri = tracking.tracking_uri(cfg.tracking.uri)
    run_id = _mlflow_run(cfg, out)
    resumed = any((out / "train").glob("checkpoint_*"))
    with ray_session(cfg.ray.address, cfg.ray.num_cpus):
        t0 = time.perf_counter()  # wall time from Ray up
        try:
            trainer = trainer_for(cfg, model_dir, out, "train", [MLflowStepLogger(uri, run_id)] if run_id else [])
            result = trainer.fit()
        except BaseException:
            if run_id:
                tracking.client(uri).set_terminated(run_id, "FAILED")
            raise
    return _finish(cfg, out, result, run_id, uri, resumed, time.perf_counter() - t0)


def _finish(cfg: SFTConfig, out: Path, result, run_id: str | None, uri: str, resumed: bool, wall: float) -> dict:
    adapter = out / "adapter"
    with result.checkpoint.as_directory() as ckpt:
        shutil.rmtree(adapter, ignore_errors=True)
        shutil.copytree(Path(ckpt) / "adapter", adapter)
    final = dict(result.metrics or {})
    summary = {
        "run_dir": str(out), "adapter": str(adapter), "base_model": cfg.base_model, "steps": int(final.get("step", 0)),
        "final_loss": final.get("loss"), "valid_loss": final.get("valid/loss"), "resumed": resumed,
        "resumed_from_step": final.get("resumed_from_step"),
        "wall_s": wall, "mlflow_run_id": run_id,
        "mean_step_time_s": final.get("mean_step_time_s"),
    }
    RunWriter(out).write_metrics(summary)  # last: the run is complete
    if run_id:
        client = tracking.client(uri)
        log_metrics(client, run_id, {"wall_s": wall, **({"mean_step_time_s": summary["mean_step_time_s"]}
                                                        if summary["mean_step_time_s"] else {})}, summary["steps"])
        client.set_tag(run_id, "llmrec.adapter", str(adapter))
        for name in (RunDir.CONFIG, RunDir.METRICS):
            client.log_artifact(run_id, str(out / name))
        client.set_terminated(run_id, "FINISHED")
    log.info("sft %s: %d steps, loss %s, valid/loss %s, adapter %s", out.name, summary["steps"],
             summary["final_loss"], summary["valid_loss"], adapter)
    return summary
