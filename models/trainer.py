"""The shared trainer: seeded epochs, validation each ``eval_every`` epochs, early stopping on
``metric`` (default ``ndcg@10``), a checkpoint of the best epoch, CPU or GPU.

``fit`` returns the best validation metrics and leaves the model holding the best weights.
A progress bar is shown only when ``TrainerConfig.progress`` is set (the CLI sets it).
"""

from __future__ import annotations

import logging
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from pydantic import Field

from llmrec.config import StrictModel
from llmrec.errors import ConfigError
from llmrec.models.base import Recommender
from llmrec.models.data import RecData
from llmrec.models.evaluation import EvalConfig, evaluate

logger = logging.getLogger(__name__)
CHECKPOINT = "best.pt"


class TrainerConfig(StrictModel):
    """Optimisation and early stopping (shared by every gradient-trained model)."""

    epochs: int = Field(100, ge=1, description="maximum training epochs")
    batch_size: int = Field(2048, ge=1, description="training examples per step (interactions or sequence windows)")
    learning_rate: float = Field(1e-3, gt=0, description="Adam learning rate")
    l2: float = Field(0.0, ge=0, description="Adam weight decay (ReChorus' l2)")
    patience: int = Field(10, ge=1, description="stop after this many evaluations without improvement")
    eval_every: int = Field(1, ge=1, description="validate every N epochs")
    metric: str = Field(
        "ndcg@10", description="validation metric for early stopping and checkpointing (higher is better)"
    )
    seed: int = Field(2020, description="seed of torch, numpy and python RNGs")
    device: str = Field("auto", description="'auto' (cuda if available), 'cpu', 'cuda' or 'cuda:N'")
    num_threads: int | None = Field(
        None, ge=1, description="torch CPU threads for this process (None: torch's default)"
    )
    progress: bool = Field(False, description="show a progress bar (set by the CLI, never in workers)")
    eval: EvalConfig = Field(default_factory=EvalConfig)


@dataclass
class TrainResult:
    """Outcome of ``fit``: best epoch, its validation metrics, per-epoch history, timing."""

    best_epoch: int
    best_valid: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    checkpoint: Path | None = None
    train_seconds_per_epoch: float = 0.0


EpochCallback = Callable[[dict[str, float], Path | None], None]


def seed_everything(seed: int) -> np.random.Generator:
    """Seed python, numpy and torch; return the numpy generator the trainer samples with."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; a cuda request without a GPU is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device={name!r} but no CUDA device is available; use 'cpu' or 'auto'")
    return torch.device(name)


def fit(
    model: Recommender,
    data: RecData,
    cfg: TrainerConfig,
    checkpoint_dir: Path | None = None,
    on_epoch: EpochCallback | None = None,
    resume: Path | None = None,
) -> TrainResult:
    """Train ``model`` on ``data``; ``on_epoch(metrics, checkpoint_or_None)`` is called after each
    validation (``checkpoint`` set when this epoch is the new best). ``resume`` is a checkpoint
    directory to continue from (its best epoch). ``fit`` seeds its own sampling from
    ``cfg.seed``; call ``seed_everything`` before building the model to seed its initial weights."""
    rng = seed_everything(cfg.seed)
    if cfg.num_threads:
        # Process-wide by torch's design; a training process (CLI or Ray trial worker) owns it.
        torch.set_num_threads(cfg.num_threads)
    device = resolve_device(cfg.device)
    model.to(device)
    if cfg.metric not in metric_names(cfg.eval):
        raise ConfigError(
            f"train.metric={cfg.metric!r} is not computed; available: {', '.join(metric_names(cfg.eval))}"
        )
    if not model.trainable:
        model.fit(data)
        valid = {f"valid/{k}": v for k, v in evaluate(model, data, "valid", cfg.eval, device).metrics.items()}
        ckpt = _save(
            model, None, checkpoint_dir, {"epoch": 0, "best": valid[f"valid/{cfg.metric}"], "bad": 0, "valid": valid}
        )
        row = {"epoch": 0, **valid}
        if on_epoch:
            on_epoch(row, ckpt)
        return TrainResult(0, valid, [row], ckpt)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.l2)
    state = {"epoch": -1, "best": -np.inf, "bad": 0, "valid": {}}
    if resume is not None:
        state = _load(model, opt, resume, device)
        rng = np.random.default_rng([cfg.seed, state["epoch"] + 1])
        logger.info("resuming from epoch %d (best %s=%.4f)", state["epoch"], cfg.metric, state["best"])
    history: list[dict[str, float]] = []
    best_epoch, best_valid, best_state = state["epoch"], dict(state["valid"]), None
    train_times: list[float] = []
    with _progress(cfg.progress, cfg.epochs - state["epoch"] - 1) as advance:
        for epoch in range(state["epoch"] + 1, cfg.epochs):
            loss, seconds = train_epoch(model, data, cfg.batch_size, rng, opt, device)
            train_times.append(seconds)
            advance()
            if (epoch + 1) % cfg.eval_every and epoch + 1 < cfg.epochs:
                continue
            valid = {f"valid/{k}": v for k, v in evaluate(model, data, "valid", cfg.eval, device).metrics.items()}
            row = {"epoch": epoch, "loss": loss, "train_seconds": seconds, **valid}
            history.append(row)
            score = valid[f"valid/{cfg.metric}"]
            ckpt = None
            if score > state["best"]:
                state.update(epoch=epoch, best=score, bad=0, valid=valid)
                best_epoch, best_valid = epoch, valid
                ckpt = _save(model, opt, checkpoint_dir, state)
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                state["bad"] += 1
            logger.info("epoch %d loss %.4f %s %.4f (%.1fs)", epoch, loss, cfg.metric, score, seconds)
            if on_epoch:
                on_epoch(row, ckpt)
            if state["bad"] >= cfg.patience:
                logger.info("early stop at epoch %d; best epoch %d", epoch, best_epoch)
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    elif resume is not None:
        _load(model, None, resume, device)
    final = checkpoint_dir / CHECKPOINT if checkpoint_dir is not None else None
    return TrainResult(best_epoch, best_valid, history, final, float(np.mean(train_times)) if train_times else 0.0)


def train_epoch(
    model: Recommender,
    data: RecData,
    batch_size: int,
    rng: np.random.Generator,
    opt: torch.optim.Optimizer,
    device: torch.device,
) -> tuple[float, float]:
    """One pass over the training batches; returns (mean loss, seconds)."""
    model.train()
    start, total, n = time.perf_counter(), 0.0, 0
    for batch in model.training_batches(data, batch_size, rng):
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = model.calculate_loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach())
        n += 1
    return total / max(n, 1), time.perf_counter() - start


def metric_names(cfg: EvalConfig) -> list[str]:
    """Every metric key the evaluator computes for ``cfg`` (e.g. ndcg@10, mrr)."""
    return ["mrr"] + [f"{m}@{k}" for m in ("hr", "ndcg", "mrr", "recall", "precision") for k in cfg.topk]


def _save(model: Recommender, opt, directory: Path | None, state: dict) -> Path | None:
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    payload = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict() if opt else None,
        "state": dict(state),
        "config": model.cfg.model_dump(mode="json"),
    }
    tmp = directory / (CHECKPOINT + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(directory / CHECKPOINT)
    return directory / CHECKPOINT


def _load(model: Recommender, opt, directory: Path, device: torch.device) -> dict:
    path = Path(directory) / CHECKPOINT
    if not path.is_file():
        raise ConfigError(f"no checkpoint at {path}")
    payload = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(payload["model"])
    if opt is not None and payload.get("optimizer"):
        opt.load_state_dict(payload["optimizer"])
    return dict(payload["state"])


def load_checkpoint(model: Recommender, directory: Path, device: str | torch.device = "cpu") -> dict:
    """Load ``directory/best.pt`` into ``model``; returns the saved trainer state (epoch, best, valid)."""
    return _load(model, None, directory, torch.device(device))


def _progress(enabled: bool, total: int):
    if not enabled:
        return nullcontext(lambda: None)
    from rich.progress import Progress

    class _Bar:
        def __enter__(self):
            self.p = Progress(transient=True)
            self.p.__enter__()
            self.task = self.p.add_task("training", total=total)
            return lambda: self.p.advance(self.task)

        def __exit__(self, *exc):
            return self.p.__exit__(*exc)

    return _Bar()
