"""Training shared by ``llmrec train`` and each Tune trial, and the Ray Tune function trainable.

``prepare_data`` reads, filters, splits and encodes once; ``train_and_test`` fits a model
and evaluates it on test; ``tune_trial`` is the function trainable: it reports validation
metrics every validation (after publishing ``last.pt`` to continue from and ``best.pt``, the best
epoch so far), then one final result with the ``test/...`` metrics. A retried or resumed trial
continues after its last validated epoch with optimizer, counters and RNG state.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from llmrec.config import validate
from llmrec.errors import DataError
from llmrec.models.base import build_model, get_model_class
from llmrec.models.data import RecData, encode
from llmrec.models.evaluation import EvalResult, evaluate, history_masked
from llmrec.models.trainer import TrainResult, fit, resolve_device, seed_everything
from llmrec.interactions import apply_filters, load_interactions, split_interactions
from llmrec.interactions.schema import ITEM_ID, USER_ID
from llmrec.tuning.config import TrainConfig, set_path
from llmrec.tuning.run_files import RunFiles

logger = logging.getLogger(__name__)


def prepare_data(cfg: TrainConfig) -> RecData:
    """Read, filter, split and encode the data of ``cfg`` (titles kept for BM25)."""
    data = load_interactions(cfg.data)
    inter = apply_filters(data.interactions, cfg.filters, data.source)
    split = split_interactions(inter, cfg.split, data.source)
    empty = [name for name in ("train", "valid", "test") if len(getattr(split, name)) == 0]
    if empty:  # training would have nothing to fit, to pick its best epoch on, or to report
        raise DataError(f"{data.source}: the {cfg.split.protocol} split of {len(inter)} interactions leaves "
                        f"{' and '.join(empty)} empty; use more data, other split.ratios, or looser filters")
    rec = encode(split, data.titles(), cfg.split.candidates)
    masked = history_masked(cfg.train.eval, get_model_class(cfg.model.name))
    rec.protocol.update(
        exclude_history=masked,
        exclude_history_from="config" if cfg.train.eval.exclude_history is not None else
        "family default (general models: true, sequential models: false, as RecBole)",
        tie_break=f"seeded random order (train.eval.seed={cfg.train.eval.seed}), stable sort on score",
        source=data.source,
        n_users=int(inter[USER_ID].nunique()),
        n_items=int(inter[ITEM_ID].nunique()),
        n_interactions=len(inter),
        filters=cfg.filters.model_dump(mode="json"),
    )
    if training := cfg.model.training_protocol():
        rec.protocol["model"] = training  # not part of the data fingerprint (tuning.api)
    return rec


def train_and_test(
    cfg: TrainConfig,
    data: RecData,
    checkpoint_dir: Path | None,
    on_epoch: Callable[[dict, Path | None], None] | None = None,
    resume: Path | None = None,
) -> tuple[Any, TrainResult, EvalResult]:
    """Build the model, fit it (best epoch restored), evaluate on test; returns (model, fit result, test result)."""
    seed_everything(cfg.train.seed)  # seeds the initial weights; fit() reseeds its own sampling
    model = build_model(cfg.model, data)
    result = fit(model, data, cfg.train, checkpoint_dir, on_epoch, resume)
    device = resolve_device(cfg.train.device)
    test = evaluate(model, data, "test", cfg.train.eval, device, keep_topk=cfg.output.export_topk)
    return model, result, test


def tune_trial(config: dict[str, Any], base: dict[str, Any], data: RecData, trials: str) -> None:
    """Ray Tune function trainable: ``config`` holds the sampled values (dotted keys) set on ``base``.

    The trial's checkpoints are llmrec's own, not Tune's: ``<trials>/<trial id>/checkpoint/``
    (``last.pt``, ``best.pt``; a local folder or a URI, published whole after every validation,
    as ``llmrec train`` does). A trial started again -- a retry, or ``llmrec tune --resume`` after
    the sweep was killed -- finds them by its trial id and continues after its last validated epoch.
    Tune's own checkpoints are not used: Tune deletes a trial's older checkpoint before its
    experiment state names the newer one, so a sweep killed in between could not be restored.
    """
    from ray import tune

    merged = base
    for key, value in config.items():
        merged = set_path(merged, key, value)
    context = tune.get_context()
    cpus = max(1, int(context.get_trial_resources().required_resources.get("CPU", 1)))
    merged = set_path(merged, "train.num_threads", merged["train"].get("num_threads") or cpus)
    merged = set_path(merged, "train.progress", False)
    cfg = validate(TrainConfig, merged)
    files = RunFiles(trials, context.get_trial_id())
    try:
        ckpt_dir = files.work / "checkpoint"
        resume = ckpt_dir if files.fetch_checkpoint() else None

        def report(row: dict, ckpt: Path | None) -> None:
            files.publish_checkpoint(new_best=ckpt is not None)
            tune.report({**row, "epoch": int(row["epoch"]) + 1})

        _, result, test = train_and_test(cfg, data, ckpt_dir, report, resume)
        final = {**result.best_valid, "epoch": cfg.train.epochs + 1, "best_epoch": result.best_epoch + 1}
        final.update({f"test/{k}": v for k, v in test.metrics.items()})
        tune.report(final)
    finally:
        files.close()
