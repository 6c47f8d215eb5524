"""Parity and speed of llmrec's baselines against RecBole on MovieLens-100K.

For BPR(MF), NeuMF, LightGCN and SASRec this trains RecBole (in its own virtual
environment, ``.venv-recbole``; recipe in ``../shared/reference/RECBOLE_SETUP.md``) and
llmrec on *the same split*: the RecBole worker dumps the valid/test interactions its
splitter produced, and llmrec trains on exactly those (train = every other interaction).
Both sides use the same embedding size, learning rate, epoch budget, validation schedule
(best validation NDCG@10 checkpoint) and CPU thread count, and report test NDCG@10 /
Recall@10 (full ranking) and training seconds per epoch (evaluation excluded).

Split: RecBole's default ``RS`` 8:1:1 per user, random order, full ranking. SASRec, a
sequential model, cannot use a random order in RecBole (it requires ``TO``); it is compared
under leave-one-out by time (``LS valid_and_test``), RecBole's sequential protocol, with no
history masking on either side (RecBole does not mask it for sequential models).

Usage (from the repository root, llmrec's venv)::

    python perf/recbole_parity.py --data-dir ../shared/data [--models bpr neumf] [--epochs-scale 0.5]

The worker role (``--worker``) runs inside ``.venv-recbole`` and is started by the driver.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPECS = {
    # name: RecBole model, llmrec model config, epoch budget, RecBole extra config, sequential.
    # Both sides: batch 2048 training examples, Adam lr 1e-3, embedding size 64, model defaults.
    "bpr": dict(recbole="BPR", llmrec={"name": "bprmf", "embedding_size": 64}, epochs=60, extra={}, seq=False),
    "neumf": dict(recbole="NeuMF", llmrec={"name": "neumf"}, epochs=20, extra={}, seq=False),
    "lightgcn": dict(
        recbole="LightGCN",
        llmrec={"name": "lightgcn", "embedding_size": 64, "n_layers": 2},
        epochs=30,
        extra={},
        seq=False,
    ),
    "sasrec": dict(
        recbole="SASRec", llmrec={"name": "sasrec"}, epochs=20, extra={"train_neg_sample_args": None}, seq=True
    ),
}


# --- worker: runs in .venv-recbole ---------------------------------------------------------


def run_recbole(args: argparse.Namespace) -> None:
    """Train one RecBole model; write metrics, per-epoch train seconds and the valid/test split."""
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_model, get_trainer, init_seed

    spec = SPECS[args.model]
    work = Path(args.work)
    (work / "data" / "ml-100k").mkdir(parents=True, exist_ok=True)
    link = work / "data" / "ml-100k" / "ml-100k.inter"
    if not link.exists():
        link.symlink_to(Path(args.inter).resolve())
    split = {"LS": "valid_and_test"} if spec["seq"] else {"RS": [0.8, 0.1, 0.1]}
    config_dict = {
        "data_path": str(work / "data"),
        "checkpoint_dir": str(work / "ckpt"),
        "epochs": args.epochs,
        "stopping_step": 10_000,
        "eval_step": args.eval_every,
        "valid_metric": "NDCG@10",
        "metrics": ["Recall", "NDCG"],
        "topk": [10],
        "use_gpu": False,
        "seed": 2020,
        "reproducibility": True,
        "show_progress": False,
        "save_dataset": False,
        "save_dataloaders": False,
        "learning_rate": 1e-3,
        "train_batch_size": 2048,
        "eval_args": {"split": split, "order": "TO" if spec["seq"] else "RO", "group_by": "user", "mode": "full"},
        **spec["extra"],
    }
    config = Config(model=spec["recbole"], dataset="ml-100k", config_dict=config_dict)
    init_seed(config["seed"], config["reproducibility"])
    torch.set_num_threads(args.threads)
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    # The split first: llmrec trains on exactly these valid/test rows (and a killed run keeps it).
    for phase, loader in (("valid", valid_data), ("test", test_data)):
        ds = loader._dataset
        users = ds.id2token(ds.uid_field, ds.inter_feat[ds.uid_field].numpy())
        items = ds.id2token(ds.iid_field, ds.inter_feat[ds.iid_field].numpy())
        with open(work / f"{phase}.tsv", "w", newline="") as fh:
            csv.writer(fh, delimiter="\t").writerows(zip(users, items))
    if args.split_only:
        return
    init_seed(config["seed"] + config["local_rank"], config["reproducibility"])
    model = get_model(config["model"])(config, train_data._dataset).to(config["device"])
    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    times: list[float] = []
    original = trainer._train_epoch

    def timed(*a, **k):
        start = time.perf_counter()
        out = original(*a, **k)
        times.append(time.perf_counter() - start)
        return out

    trainer._train_epoch = timed
    # Test metrics at every validation, so one long run also answers every shorter budget:
    # a run of E epochs reports the test metrics of its best validation epoch <= E.
    curve: list[dict] = []
    original_valid = trainer._valid_epoch

    def valid_and_test(*a, **k):
        score, result = original_valid(*a, **k)
        test_now = trainer.evaluate(test_data, load_best_model=False, show_progress=False)
        curve.append(
            {
                "epoch": len(times) - 1,
                "valid_ndcg@10": float(score),
                "ndcg@10": float(test_now["ndcg@10"]),
                "recall@10": float(test_now["recall@10"]),
            }
        )
        # Written as it grows: an interrupted long run still answers the budgets it reached.
        (work / "curve.json").write_text(json.dumps({"curve": curve, "epoch_seconds": times}))
        return score, result

    trainer._valid_epoch = valid_and_test
    trainer.fit(train_data, valid_data, saved=True, show_progress=False)
    test = trainer.evaluate(test_data, load_best_model=True, show_progress=False)
    result = {
        "ndcg@10": float(test["ndcg@10"]),
        "recall@10": float(test["recall@10"]),
        "epoch_seconds": times,
        "curve": curve,
    }
    (work / "recbole.json").write_text(json.dumps(result))


# --- driver: runs in llmrec's venv ---------------------------------------------------------


def run_llmrec(
    name: str,
    work: Path,
    recbole_dir: Path,
    epochs: int,
    eval_every: int,
    threads: int,
    model_set: dict | None = None,
    seed: int = 2020,
) -> dict:
    """Train llmrec's model on the split the RecBole worker dumped; return test metrics and timing."""
    import pandas as pd

    from llmrec.models.base import build_model, model_config
    from llmrec.models.data import encode
    from llmrec.models.evaluation import EvalConfig, evaluate
    from llmrec.models.trainer import TrainerConfig, fit, seed_everything
    from llmrec.interactions import DataSpec, Split, load_interactions

    spec = SPECS[name]
    raw = load_interactions(DataSpec(format="recbole", path=recbole_dir)).interactions
    key = raw["user_id"] + "\t" + raw["item_id"]
    parts = {}
    for phase in ("valid", "test"):
        dumped = pd.read_csv(work / f"{phase}.tsv", sep="\t", header=None, names=["user_id", "item_id"], dtype=str)
        parts[phase] = raw.loc[key.isin(set(dumped["user_id"] + "\t" + dumped["item_id"]))]
        if len(parts[phase]) != len(dumped):
            raise RuntimeError(f"{phase}: {len(dumped)} dumped rows, {len(parts[phase])} matched")
    held = set(key[raw.index.isin(parts["valid"].index) | raw.index.isin(parts["test"].index)])
    train = raw.loc[~key.isin(held)]
    split = Split.from_frames(train, parts["valid"], parts["test"], {"protocol": "recbole-dump"})
    data = encode(split)
    cfg = TrainerConfig(
        epochs=epochs,
        batch_size=2048,
        learning_rate=1e-3,
        patience=10_000,
        eval_every=eval_every,
        metric="ndcg@10",
        seed=seed,
        device="cpu",
        num_threads=threads,
        eval=EvalConfig(topk=[10], exclude_history=not spec["seq"]),
    )
    seed_everything(seed)
    model = build_model(model_config({**spec["llmrec"], **(model_set or {})}), data)
    curve: list[dict] = []

    def test_now(row: dict, _checkpoint) -> None:
        now = evaluate(model, data, "test", cfg.eval).metrics
        curve.append(
            {
                "epoch": row["epoch"],
                "valid_ndcg@10": row["valid/ndcg@10"],
                "ndcg@10": now["ndcg@10"],
                "recall@10": now["recall@10"],
            }
        )

    result = fit(model, data, cfg, on_epoch=test_now)
    test = evaluate(model, data, "test", cfg.eval).metrics
    return {
        "ndcg@10": test["ndcg@10"],
        "recall@10": test["recall@10"],
        "epoch_seconds": [r["train_seconds"] for r in result.history],
        "seconds_per_epoch": result.train_seconds_per_epoch,
        "best_epoch": result.best_epoch,
        "curve": curve,
        "n_train": len(train),
        "n_valid": len(parts["valid"]),
        "n_test": len(parts["test"]),
    }


def compare(args: argparse.Namespace) -> list[dict]:
    """Run every requested model on both sides and print the parity table."""
    sys.path.insert(0, str(REPO))
    recbole_dir = Path(args.data_dir).expanduser().resolve() / "ml-100k-recbole"
    inter = recbole_dir / "ml-100k.inter"
    if not inter.is_file():
        raise SystemExit(f"MovieLens-100K (RecBole format) not found at {inter}; pass --data-dir")
    python = Path(args.recbole_python)
    if not python.is_file():
        raise SystemExit(f"RecBole venv not found ({python}); build it as in ../shared/reference/RECBOLE_SETUP.md")
    rows = []
    for name in args.models:
        epochs = args.epochs or max(1, round(SPECS[name]["epochs"] * args.epochs_scale))
        # RecBole's side is slow (SASRec: minutes per epoch); its outputs are kept per setting
        # so that llmrec's side can be re-measured without re-training RecBole.
        work = Path(args.recbole_cache) / f"{name}-e{epochs}-t{args.threads}-v{args.eval_every}"
        work.mkdir(parents=True, exist_ok=True)
        if args.rerun_recbole or not (work / "recbole.json").is_file():
            cmd = [
                str(python),
                __file__,
                "--worker",
                "--model",
                name,
                "--work",
                str(work),
                "--inter",
                str(inter),
                "--epochs",
                str(epochs),
                "--eval-every",
                str(args.eval_every),
                "--threads",
                str(args.threads),
            ]
            t0 = time.perf_counter()
            proc = subprocess.run(
                cmd,
                cwd=work,
                capture_output=True,
                text=True,
                env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
            )
            if proc.returncode != 0:
                raise SystemExit(f"RecBole {name} failed:\n{proc.stderr[-3000:]}")
            rb = json.loads((work / "recbole.json").read_text())
            rb["wall_seconds"] = time.perf_counter() - t0
            (work / "recbole.json").write_text(json.dumps(rb))
        else:
            print(f"(RecBole {name}: cached result from {work})", file=sys.stderr)
        rb = json.loads((work / "recbole.json").read_text())
        model_set = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.model_set)}
        ours = run_llmrec(name, work, recbole_dir, epochs, args.eval_every, args.threads, model_set)
        # Other seeds on llmrec's side (RecBole's side is one seeded run): the spread shows how
        # much of a difference is seed noise.
        others = [
            run_llmrec(name, work, recbole_dir, epochs, args.eval_every, args.threads, model_set, seed=2020 + k)
            for k in range(1, args.llmrec_seeds)
        ]
        rb_sec = sum(rb["epoch_seconds"]) / len(rb["epoch_seconds"])
        for budget in sorted({*(b for b in args.budgets if b < epochs), epochs}):
            rb_at = at_budget(rb.get("curve"), budget, ties_to_later=True) if budget < epochs else rb
            us_at = at_budget(ours["curve"], budget, ties_to_later=False) if budget < epochs else ours
            if rb_at is None or us_at is None:
                continue
            seeds = [us_at["ndcg@10"]] + [at_budget(o["curve"], budget, ties_to_later=False)["ndcg@10"] for o in others]
            row = {
                "model": name,
                "epochs": budget,
                "recbole": {**rb, **rb_at, "seconds_per_epoch": rb_sec},
                "llmrec": {**ours, **us_at},
                "ndcg_rel_diff": us_at["ndcg@10"] / rb_at["ndcg@10"] - 1 if rb_at["ndcg@10"] else None,
                "time_ratio": ours["seconds_per_epoch"] / rb_sec if rb_sec else None,
                "llmrec_seeds_ndcg@10": seeds,
                "model_set": model_set,
            }
            rows.append(row)
            print(format_row(row), flush=True)
        # Which epoch validation picks is itself noisy at these NDCG levels; the mean test NDCG@10
        # over the second half of the budget compares the two training curves with less noise.
        rb_late, us_late = late_mean(rb.get("curve"), epochs), [late_mean(o["curve"], epochs) for o in [ours, *others]]
        if rb_late is not None and rows:
            rows[-1]["late_mean_ndcg@10"] = {"recbole": rb_late, "llmrec": us_late}
            spread = f" (seeds: {statistics.mean(us_late):.4f} ± {statistics.stdev(us_late):.4f})" if len(us_late) > 1 else ""
            print(
                f"{name}: mean test NDCG@10 over epochs {epochs // 2 + 1}-{epochs}: RecBole {rb_late:.4f}, "
                f"llmrec {us_late[0]:.4f} ({100 * (us_late[0] / rb_late - 1):+.1f}%){spread}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def late_mean(curve: list[dict] | None, epochs: int) -> float | None:
    """Mean test NDCG@10 over the second half of the epochs (per-epoch test metrics of the curve)."""
    late = [point["ndcg@10"] for point in curve or [] if point["epoch"] >= epochs // 2]
    return statistics.mean(late) if late else None


def at_budget(curve: list[dict] | None, budget: int, ties_to_later: bool) -> dict | None:
    """Test metrics a run of ``budget`` epochs reports: those of its best validation epoch so far.

    RecBole keeps a later epoch on a tie (``>=``), llmrec the earlier one (``>``)."""
    best = None
    for point in curve or []:
        if point["epoch"] >= budget:
            break
        if best is None or point["valid_ndcg@10"] > best["valid_ndcg@10"] or (
            ties_to_later and point["valid_ndcg@10"] == best["valid_ndcg@10"]
        ):
            best = point
    return None if best is None else {"ndcg@10": best["ndcg@10"], "recall@10": best["recall@10"], "best_epoch": best["epoch"]}


def format_row(row: dict) -> str:
    """One markdown table row."""
    rb, us = row["recbole"], row["llmrec"]
    seeds = row.get("llmrec_seeds_ndcg@10", [])
    return (
        f"| {row['model']} | {row['epochs']} | {rb['ndcg@10']:.4f} | {us['ndcg@10']:.4f} | {100 * row['ndcg_rel_diff']:+.1f}% "
        f"| {rb['recall@10']:.4f} | {us['recall@10']:.4f} | {rb['seconds_per_epoch']:.2f} | {us['seconds_per_epoch']:.2f} "
        f"| {row['time_ratio']:.2f}x |"
        + (f" {statistics.mean(seeds):.4f} ± {statistics.stdev(seeds):.4f} (n={len(seeds)}) |" if len(seeds) > 1 else "")
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--split-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--inter", help=argparse.SUPPRESS)
    p.add_argument("--models", nargs="+", default=list(SPECS), choices=list(SPECS))
    p.add_argument("--data-dir", default=os.environ.get("LLMREC_DATA_DIR", str(REPO.parent / "shared" / "data")))
    p.add_argument("--recbole-python", default=str(REPO / ".venv-recbole" / "bin" / "python"))
    p.add_argument("--epochs-scale", type=float, default=1.0, help="multiply every model's epoch budget")
    p.add_argument("--epochs", type=int, help="one epoch budget for every model (overrides --epochs-scale)")
    p.add_argument(
        "--budgets",
        type=int,
        nargs="*",
        default=[],
        help="also report shorter budgets from the same runs (test metrics at the best validation epoch so far)",
    )
    p.add_argument("--recbole-cache", default=str(REPO / "runs" / "perf" / "recbole-cache"))
    p.add_argument("--rerun-recbole", action="store_true", help="ignore a cached RecBole result")
    p.add_argument(
        "--llmrec-seeds", type=int, default=1, help="also train llmrec with N-1 more seeds; prints NDCG@10 mean ± sd"
    )
    p.add_argument(
        "--model-set",
        nargs="*",
        default=[],
        metavar="KEY=JSON",
        help="llmrec model options for every --models entry, e.g. --models sasrec --model-set train_stride=10",
    )
    p.add_argument("--eval-every", type=int, default=1, help="validate every N epochs (both sides)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (both sides)")
    p.add_argument("--out", default=str(REPO / "runs" / "perf" / "recbole_parity.json"))
    args = p.parse_args()
    if args.worker:
        run_recbole(args)
        return
    print(
        "| model | epochs | RecBole NDCG@10 | llmrec NDCG@10 | rel. diff | RecBole Recall@10 | llmrec Recall@10 "
        "| RecBole s/epoch | llmrec s/epoch | time ratio |" + (" llmrec NDCG@10 over seeds |" if args.llmrec_seeds > 1 else "")
    )
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.llmrec_seeds > 1 else ""))
    rows = compare(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
