"""The shared trainer: seeded epochs, validation each ``eval_every`` epochs, early stopping on
``metric`` (default ``ndcg@10``; a tie counts as an improvement, as RecBole), a checkpoint of
the best epoch (``best.pt``) and of the last validated epoch (``last.pt``: weights, optimizer,
early-stopping counters and RNG states, so a resumed run continues exactly), CPU or GPU.

``fit`` returns the best validation metrics and leaves the model holding the best weights.
A progress bar is shown only when ``TrainerConfig.progress`` is set (the CLI sets it).
"""

from __future__ import annotations

import logging
import pickle
import random
import shutil
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
LAST = "last.pt"


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
    directory to continue from: its ``last.pt`` (the last validated epoch, with optimizer,
    early-stopping counters and RNG states), else its ``best.pt``. ``fit`` seeds its own sampling from
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
    done = -1  # last finished epoch
    if resume is not None:
        state, rng, done = _resume(model, opt, Path(resume), checkpoint_dir, device, cfg.seed)
        logger.info("resuming after epoch %d (best epoch %d, %s=%.4f, %d evaluation(s) without improvement)",
                    done, state["epoch"], cfg.metric, state["best"], state["bad"])
        replay = state.pop("last_row", None)
        if replay is not None and on_epoch:
            # the interruption may have come between saving the last epoch and reporting it: report it
            # again, so the logger has every epoch (at worst one twice), never one missing
            on_epoch(replay, None)
    history: list[dict[str, float]] = []
    best_epoch, best_valid, best_state = state["epoch"], dict(state["valid"]), None
    train_times: list[float] = []
    stopped = resume is not None and state["bad"] >= cfg.patience
    with _progress(cfg.progress, cfg.epochs - done - 1) as advance:
        for epoch in range(done + 1, cfg.epochs if not stopped else done + 1):
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
            if score >= state["best"]:  # a tie is an improvement (RecBole's early stopping)
                state.update(epoch=epoch, best=score, bad=0, valid=valid)
                best_epoch, best_valid = epoch, valid
                ckpt = _save(model, opt, checkpoint_dir, state)
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                state["bad"] += 1
            _save(model, opt, checkpoint_dir, {**state, "last_epoch": epoch, "last_row": row}, LAST, rng)
            logger.info("epoch %d loss %.4f %s %.4f (%.1fs)", epoch, loss, cfg.metric, score, seconds)
            if on_epoch:
                on_epoch(row, ckpt)
            if state["bad"] >= cfg.patience:
                logger.info("early stop at epoch %d; best epoch %d", epoch, best_epoch)
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    elif resume is not None and checkpoint_dir is not None and (checkpoint_dir / CHECKPOINT).is_file():
        _load(model, None, checkpoint_dir, device)
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


def _save(model: Recommender, opt, directory: Path | None, state: dict, name: str = CHECKPOINT,
          rng: np.random.Generator | None = None) -> Path | None:
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    payload = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict() if opt else None,
        "state": dict(state),
        "config": model.cfg.model_dump(mode="json"),
    }
    if rng is not None:
        payload["rng"] = {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state(), "python": random.getstate(),
                          "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}
    tmp = directory / (name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(directory / name)
    return directory / name


def load_payload(path: Path, device: str | torch.device = "cpu") -> dict:
    """A checkpoint file's content, read as tensors and plain values only (``weights_only``): a
    file whose pickle names any other object (code to run on load, from a tampered or foreign
    file) is refused without running it. The one way llmrec reads a checkpoint."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's message suggests weights_only=False; keep only its line naming the refused object
        detail = next((line.strip() for line in str(e).splitlines() if "GLOBAL" in line), "")
        found = f" ({detail})" if detail else ""
        raise ConfigError(
            f"{path}: refused to load: the checkpoint holds objects other than tensors and plain values{found}. "
            "It was not written by this llmrec version, or it was tampered with; loading it could run code, so "
            "it is not loaded. Move it aside, or start a new run directory, to go on without it") from e
    except (RuntimeError, EOFError, OSError) as e:
        raise ConfigError(f"{path}: not a readable checkpoint: {type(e).__name__}: {e}") from e


def _load(model: Recommender, opt, directory: Path, device: torch.device, name: str = CHECKPOINT) -> dict:
    path = Path(directory) / name
    if not path.is_file():
        raise ConfigError(f"no checkpoint at {path}")
    payload = load_payload(path, device)
    model.load_state_dict(payload["model"])
    if opt is not None and payload.get("optimizer"):
        opt.load_state_dict(payload["optimizer"])
    return {**payload["state"], "_rng": payload.get("rng")}


def _resume(model: Recommender, opt, directory: Path, checkpoint_dir: Path | None, device: torch.device,
            seed: int) -> tuple[dict, np.random.Generator, int]:
    """Continue from ``last.pt`` (weights, optimizer, counters, RNG) or, for older checkpoints, ``best.pt``."""
    if checkpoint_dir is not None and checkpoint_dir.resolve() != directory.resolve() \
            and (directory / CHECKPOINT).is_file():
        checkpoint_dir.mkdir(parents=True, exist_ok=True)  # the best epoch so far stays the answer if none beats it
        shutil.copyfile(directory / CHECKPOINT, checkpoint_dir / CHECKPOINT)
    if not (directory / LAST).is_file():
        logger.warning("no %s in %s: resuming from the best epoch with fresh RNG", LAST, directory)
        state = _load(model, opt, directory, device)
        state.pop("_rng", None)
        return state, np.random.default_rng([seed, state["epoch"] + 1]), state["epoch"]
    state = _load(model, opt, directory, device, LAST)
    saved = state.pop("_rng") or {}
    done = state.pop("last_epoch", state["epoch"])
    rng = np.random.default_rng(seed)
    if saved:
        rng.bit_generator.state = saved["numpy"]
        torch.set_rng_state(saved["torch"].cpu())
        random.setstate(saved["python"])
        if saved.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda"])
    return state, rng, done


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
