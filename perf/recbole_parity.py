"""Parity and speed of llmrec's baselines against RecBole on MovieLens-100K, over seeds.

For BPR(MF), NeuMF, LightGCN, SASRec and GRU4Rec, each seed trains RecBole 1.2.1 (in its own
virtual environment ``.venv-recbole``, recipe in ``../shared/reference/RECBOLE_SETUP.md``; the
worker is ``perf/recbole_worker.py``) and then llmrec on *the split that RecBole seed produced*
(the worker dumps its valid/test rows; llmrec trains on every other row), with the same seed,
model sizes, learning rate (1e-3), batch size (2048 examples) and CPU threads. Reported: mean ±
sample std over seeds of test NDCG@10 and Recall@10 per side, the relative difference of the
means, Welch's t-test p-value (is the difference within seed noise?), and the ratio of mean
training seconds per epoch (evaluation excluded), both sides timed in this same invocation.

Two operating points (``--points``):

- ``budget``: a fixed epoch budget per model (``SPECS``; ``--epochs`` overrides), validation
  every epoch on NDCG@10, the best validation epoch restored for test, no early stopping;
- ``recbole``: RecBole's own defaults — at most 300 epochs, early stopping on validation
  MRR@10 after ``stopping_step: 10`` evaluations without improvement (RecBole stops when its
  counter *exceeds* 10, so llmrec's ``patience`` is 11), ties counting as improvement on both
  sides (``--max-epochs`` lowers the 300 for a smoke run).

Splits: RecBole's default ``RS`` 8:1:1 per user in random order, full ranking, history masked
(general models); SASRec and GRU4Rec use RecBole's sequential protocol (``LS valid_and_test``,
time order, no history masking — RecBole refuses a random order for sequential models).

RecBole results are re-measured by default. ``--reuse-recbole`` takes a stored result only
when its key (a hash of the model, the complete RecBole config, the seed and the thread count)
matches, and the table then says when that RecBole run was measured.

Usage (repository root, llmrec's venv; the full table takes hours on 2 cores — RecBole's
SASRec alone needs ~5 min per epoch)::

    nice python perf/recbole_parity.py --models bpr neumf lightgcn sasrec gru4rec --seeds 5
    nice python perf/recbole_parity.py --models bpr --seeds 2 --epochs 2 --points budget   # smoke
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().parent / "recbole_worker.py"
COMMON = {"learning_rate": 1e-3, "train_batch_size": 2048, "metrics": ["Recall", "NDCG", "MRR"], "topk": [10],
          "use_gpu": False, "reproducibility": True, "show_progress": False, "save_dataset": False,
          "save_dataloaders": False, "eval_step": 1}
SPECS = {
    # name: RecBole model, llmrec model config, epoch budget, extra RecBole config, sequential
    "bpr": dict(recbole="BPR", llmrec={"name": "bprmf", "embedding_size": 64}, epochs=60, extra={}, seq=False),
    "neumf": dict(recbole="NeuMF", llmrec={"name": "neumf"}, epochs=20, extra={}, seq=False),
    "lightgcn": dict(recbole="LightGCN", llmrec={"name": "lightgcn", "embedding_size": 64, "n_layers": 2},
                     epochs=30, extra={}, seq=False),
    "sasrec": dict(recbole="SASRec", llmrec={"name": "sasrec"}, epochs=20,
                   extra={"train_neg_sample_args": None}, seq=True),
    "gru4rec": dict(recbole="GRU4Rec", llmrec={"name": "gru4rec"}, epochs=20,
                    extra={"train_neg_sample_args": None}, seq=True),
}


def recbole_config(name: str, point: str, seed: int, epochs: int) -> dict:
    """The complete RecBole config_dict of one run (also the cache key's content)."""
    spec = SPECS[name]
    split = {"LS": "valid_and_test"} if spec["seq"] else {"RS": [0.8, 0.1, 0.1]}
    order = {"eval_args": {"split": split, "order": "TO" if spec["seq"] else "RO", "group_by": "user",
                           "mode": "full"}}
    stop = ({"epochs": epochs, "stopping_step": 10_000, "valid_metric": "NDCG@10"} if point == "budget"
            else {"epochs": epochs, "stopping_step": 10, "valid_metric": "MRR@10"})
    return {**COMMON, **order, **stop, "seed": seed, **spec["extra"]}


def run_recbole(args, name: str, point: str, seed: int, epochs: int, inter: Path) -> tuple[dict, Path, bool]:
    """Train RecBole (or, with --reuse-recbole, load a result whose key matches); returns (result, work, reused)."""
    cfg = recbole_config(name, point, seed, epochs)
    key = hashlib.sha256(json.dumps([SPECS[name]["recbole"], cfg, args.threads], sort_keys=True).encode()).hexdigest()
    work = Path(args.work_dir) / f"{name}-{point}-s{seed}-{key[:16]}"
    done = work / "recbole.json"
    if args.reuse_recbole and done.is_file():
        return json.loads(done.read_text()), work, True
    work.mkdir(parents=True, exist_ok=True)
    cmd = [args.recbole_python, str(WORKER), "--model", SPECS[name]["recbole"], "--config", json.dumps(cfg),
           "--inter", str(inter), "--work", str(work), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                          env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"RecBole {name} (seed {seed}, {point}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(done.read_text()), work, False


def run_llmrec(name: str, point: str, seed: int, epochs: int, work: Path, recbole_dir: Path, threads: int,
               train_samples: str = "prefix") -> dict:
    """llmrec on the split the RecBole run dumped, with the same seed and operating point (sequential
    models build their training samples by ``train_samples``)."""
    import pandas as pd

    from llmrec.interactions import DataSpec, Split, load_interactions
    from llmrec.models.base import build_model, model_config
    from llmrec.models.data import encode
    from llmrec.models.evaluation import EvalConfig, evaluate
    from llmrec.models.trainer import TrainerConfig, fit, seed_everything

    raw = load_interactions(DataSpec(format="recbole", path=recbole_dir)).interactions
    key = raw["user_id"] + "\t" + raw["item_id"]
    parts = {}
    for phase in ("valid", "test"):
        dumped = pd.read_csv(work / f"{phase}.tsv", sep="\t", header=None, names=["user_id", "item_id"], dtype=str)
        parts[phase] = raw.loc[key.isin(set(dumped["user_id"] + "\t" + dumped["item_id"]))]
        if len(parts[phase]) != len(dumped):
            raise RuntimeError(f"{phase}: {len(dumped)} dumped rows, {len(parts[phase])} matched")
    held = raw.index.isin(parts["valid"].index) | raw.index.isin(parts["test"].index)
    data = encode(Split.from_frames(raw.loc[~held], parts["valid"], parts["test"], {"protocol": "recbole-dump"}))
    budget = point == "budget"
    cfg = TrainerConfig(epochs=epochs, batch_size=2048, learning_rate=1e-3, patience=10_000 if budget else 11,
                        metric="ndcg@10" if budget else "mrr@10", seed=seed, device="cpu", num_threads=threads,
                        eval=EvalConfig(topk=[10]))  # history masking: the family default, as RecBole
    seed_everything(seed)
    spec = SPECS[name]
    model = build_model(model_config(spec["llmrec"] | ({"train_samples": train_samples} if spec["seq"] else {})), data)
    result = fit(model, data, cfg)
    test = evaluate(model, data, "test", cfg.eval).metrics
    return {"ndcg@10": test["ndcg@10"], "recall@10": test["recall@10"], "mrr@10": test["mrr@10"],
            "best_epoch": result.best_epoch, "epochs_run": len(result.history),
            "epoch_seconds": [r["train_seconds"] for r in result.history]}


def summarize(name: str, point: str, epochs: int, rb: list[dict], us: list[dict]) -> dict:
    """Mean ± std per side, relative difference, Welch p-value, epoch-time ratio."""
    from scipy.stats import ttest_ind

    row = {"model": name, "point": point, "max_epochs": epochs, "seeds": len(rb)}
    for metric in ("ndcg@10", "recall@10"):
        a, b = [r[metric] for r in rb], [r[metric] for r in us]
        row[metric] = {"recbole": stats(a), "llmrec": stats(b),
                       "rel_diff": statistics.mean(b) / statistics.mean(a) - 1 if statistics.mean(a) else None,
                       "welch_p": float(ttest_ind(b, a, equal_var=False).pvalue) if len(a) > 1 else None}
    sec = {side: statistics.mean(s for r in runs for s in r["epoch_seconds"]) for side, runs in
           (("recbole", rb), ("llmrec", us))}
    row.update(seconds_per_epoch=sec, time_ratio=sec["llmrec"] / sec["recbole"],
               epochs_run={"recbole": [r["epochs_run"] for r in rb], "llmrec": [r["epochs_run"] for r in us]},
               recbole_measured_at=sorted({r["measured_at"] for r in rb}))
    return row


def stats(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "values": values}


def fmt(s: dict) -> str:
    return f"{s['mean']:.4f}" + (f" ± {s['std']:.4f}" if s["std"] is not None else "")


def table_row(row: dict) -> str:
    n, r = row["ndcg@10"], row["recall@10"]
    p = n["welch_p"]
    noise = "—" if p is None else ("yes" if p >= 0.05 else "no") + f" (p={p:.2f})"
    return (f"| {row['model']} | {row['point']} | {row['seeds']} | {fmt(n['recbole'])} | {fmt(n['llmrec'])} "
            f"| {100 * n['rel_diff']:+.1f}% | {noise} | {fmt(r['recbole'])} | {fmt(r['llmrec'])} "
            f"| {row['seconds_per_epoch']['recbole']:.2f} | {row['seconds_per_epoch']['llmrec']:.2f} "
            f"| {row['time_ratio']:.2f} | {', '.join(row['recbole_measured_at'])} |")


HEADER = ("| model | point | seeds | NDCG@10 RecBole | NDCG@10 llmrec | Δ | within seed noise (Welch) "
          "| Recall@10 RecBole | Recall@10 llmrec | s/epoch RecBole | s/epoch llmrec | time ratio "
          "| RecBole measured |\n"
          "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")


def combine(files: list[Path], out: Path) -> None:
    """Pool the per-seed runs of several result files (one row per model, point and epoch budget)."""
    pooled: dict[tuple, dict] = {}
    for f in files:
        for row in json.loads(f.read_text()):
            key = (row["model"], row["point"], row["max_epochs"], row.get("train_samples"))
            slot = pooled.setdefault(key, {"recbole": {}, "llmrec": {}})
            for side in ("recbole", "llmrec"):
                for i, run in enumerate(row["runs"][side]):
                    seed = run.get("seed", f"{f.name}#{i}")
                    if seed in slot[side]:
                        raise SystemExit(f"{f}: {row['model']} seed {seed} is already in an earlier file")
                    slot[side][seed] = run
    rows = []
    print(HEADER, flush=True)
    for (name, point, epochs, samples), slot in pooled.items():
        rb, us = list(slot["recbole"].values()), list(slot["llmrec"].values())
        rows.append(summarize(name, point, epochs, rb, us) | {"runs": {"recbole": rb, "llmrec": us}}
                    | ({"train_samples": samples} if samples else {}))
        print(table_row(rows[-1]), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(SPECS), choices=list(SPECS))
    p.add_argument("--points", nargs="+", default=["budget", "recbole"], choices=["budget", "recbole"])
    p.add_argument("--seeds", type=int, default=5, help="seeds per side (2020, 2021, ...)")
    p.add_argument("--first-seed", type=int, default=2020,
                   help="the first seed (more seeds later: --first-seed 2023 --seeds 2, then --combine)")
    p.add_argument("--combine", nargs="+", type=Path, metavar="JSON",
                   help="train nothing: print (and write to --out) the table of the runs stored in these result "
                        "files, rows of the same model, point and epochs pooled (each seed once)")
    p.add_argument("--epochs", type=int, help="budget point: one epoch budget for every model (default: SPECS)")
    p.add_argument("--max-epochs", type=int, default=300, help="recbole point: epoch cap (RecBole's default 300)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads, both sides")
    p.add_argument("--train-samples", default="prefix", choices=["prefix", "windows"],
                   help="llmrec's SASRec/GRU4Rec training samples: RecBole's prefixes (default) or packed windows")
    p.add_argument("--data-dir", default=os.environ.get("LLMREC_DATA_DIR", str(REPO.parent / "shared" / "data")))
    p.add_argument("--recbole-python", default=str(REPO / ".venv-recbole" / "bin" / "python"))
    p.add_argument("--work-dir", default=str(REPO / "runs" / "perf" / "recbole-parity"))
    p.add_argument("--reuse-recbole", action="store_true",
                   help="take a stored RecBole result whose key (model, full config, seed, threads) matches")
    p.add_argument("--out", default=str(REPO / "runs" / "perf" / "recbole_parity.json"))
    args = p.parse_args()
    if args.combine:
        combine(args.combine, Path(args.out))
        return
    recbole_dir = Path(args.data_dir).expanduser().resolve() / "ml-100k-recbole"
    inter = recbole_dir / "ml-100k.inter"
    if not inter.is_file():
        raise SystemExit(f"MovieLens-100K (RecBole format) not found at {inter}; pass --data-dir")
    if not Path(args.recbole_python).is_file():
        raise SystemExit(f"RecBole venv not found ({args.recbole_python}); see ../shared/reference/RECBOLE_SETUP.md")
    sys.path.insert(0, str(REPO))
    rows = []
    print(HEADER, flush=True)
    for name in args.models:
        for point in args.points:
            epochs = (args.epochs or SPECS[name]["epochs"]) if point == "budget" else args.max_epochs
            rb, us = [], []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                t0 = time.perf_counter()
                result, work, reused = run_recbole(args, name, point, seed, epochs, inter)
                rb.append({**result, "reused": reused, "seed": seed})
                us.append(run_llmrec(name, point, seed, epochs, work, recbole_dir, args.threads, args.train_samples)
                          | {"seed": seed})
                print(f"  {name} {point} seed {seed}: RecBole NDCG@10 {result['ndcg@10']:.4f} "
                      f"({result['epochs_run']} ep{', reused' if reused else ''}), llmrec {us[-1]['ndcg@10']:.4f} "
                      f"({us[-1]['epochs_run']} ep), {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            rows.append(summarize(name, point, epochs, rb, us) | {"runs": {"recbole": rb, "llmrec": us}}
                        | ({"train_samples": args.train_samples} if SPECS[name]["seq"] else {}))
            print(table_row(rows[-1]), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
