"""llmrec's training seconds per epoch of SASRec and GRU4Rec on MovieLens-100K, per ``train_samples``.

Leave-one-out by time (RecBole's sequential ``LS`` split), the models' default sizes, batch size
2048, learning rate 1e-3, one CPU thread by default; every (model, train_samples) pair is timed in
this one invocation, the modes taking turns epoch by epoch, so the rows compare like with like on
a loaded machine. Only training is
timed (``train_epoch``, batch building included; no validation): wall seconds, and the process's CPU
seconds, which a loaded machine inflates less (one thread: CPU seconds ≈ wall seconds when idle). The
load average (``uptime``) is printed before and after. RecBole's own epoch times come from ``perf/recbole_parity.py``.

    nice -n 5 python perf/sequence_epoch_time.py --epochs 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["sasrec", "gru4rec"], choices=["sasrec", "gru4rec"])
    p.add_argument("--samples", nargs="+", default=["windows", "prefix"], choices=["windows", "prefix"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--seed", type=int, default=2020)
    p.add_argument("--data-dir", default=os.environ.get("LLMREC_DATA_DIR", str(REPO.parent / "shared" / "data")))
    args = p.parse_args()
    sys.path.insert(0, str(REPO))

    import torch

    from llmrec.interactions import DataSpec, SplitConfig, load_interactions, split_interactions
    from llmrec.models.base import build_model, model_config
    from llmrec.models.data import encode
    from llmrec.models.trainer import seed_everything, train_epoch

    torch.set_num_threads(args.threads)
    raw = load_interactions(DataSpec(format="movielens-100k", path=Path(args.data_dir) / "ml-100k")).interactions
    data = encode(split_interactions(raw, SplitConfig(protocol="loo")))
    print(f"uptime before: {uptime()}", flush=True)
    print("| model | train_samples | batches | wall s/epoch (each) | CPU s/epoch (each) |\n|---|---|---:|---|---|",
          flush=True)
    for name in args.models:
        runs = {}
        for samples in args.samples:
            seed_everything(args.seed)
            model = build_model(model_config({"name": name, "train_samples": samples}), data)
            n = sum(1 for _ in model.training_batches(data, 2048, seed_everything(args.seed)))
            runs[samples] = (model, torch.optim.Adam(model.parameters(), lr=1e-3), seed_everything(args.seed), n, [], [])
        for _ in range(args.epochs):  # the modes take turns, so a change of load hits both alike
            for model, opt, rng, _, wall, cpu in runs.values():
                start = time.process_time()
                wall.append(train_epoch(model, data, 2048, rng, opt, torch.device("cpu"))[1])
                cpu.append(time.process_time() - start)
        for samples, (_, _, _, n, wall, cpu) in runs.items():
            print(f"| {name} | {samples} | {n} | {seconds(wall)} | {seconds(cpu)} |", flush=True)
    print(f"uptime after: {uptime()}", flush=True)


def seconds(values: list[float]) -> str:
    return f"{statistics.mean(values):.1f} ({', '.join(f'{v:.1f}' for v in values)})"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
