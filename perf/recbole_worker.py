"""RecBole side of ``perf/recbole_parity.py``; runs inside ``.venv-recbole`` (never imports llmrec).

One invocation trains one RecBole model with one seed at one operating point, and writes to
``--work``: ``valid.tsv`` / ``test.tsv`` (the split RecBole's splitter produced, so llmrec trains
on exactly the same rows) and ``recbole.json`` (test NDCG@10 / Recall@10 / MRR@10 of the best
validation epoch, per-epoch training seconds, the epochs run, the full config and when it was
measured). The config comes as JSON (``--config``) from the driver, which owns every setting.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="RecBole model name, e.g. BPR, SASRec")
    p.add_argument("--config", required=True, help="RecBole config_dict as JSON")
    p.add_argument("--inter", required=True, help="the ml-100k.inter atomic file")
    p.add_argument("--work", required=True, help="output folder")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    import torch
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_model, get_trainer, init_seed

    work = Path(args.work)
    (work / "data" / "ml-100k").mkdir(parents=True, exist_ok=True)
    link = work / "data" / "ml-100k" / "ml-100k.inter"
    if not link.exists():
        link.symlink_to(Path(args.inter).resolve())
    config_dict = {**json.loads(args.config), "data_path": str(work / "data"), "checkpoint_dir": str(work / "ckpt")}
    config = Config(model=args.model, dataset="ml-100k", config_dict=config_dict)
    init_seed(config["seed"], config["reproducibility"])
    torch.set_num_threads(args.threads)
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    for phase, loader in (("valid", valid_data), ("test", test_data)):
        ds = loader._dataset
        users = ds.id2token(ds.uid_field, ds.inter_feat[ds.uid_field].numpy())
        items = ds.id2token(ds.iid_field, ds.inter_feat[ds.iid_field].numpy())
        with open(work / f"{phase}.tsv", "w", newline="") as fh:
            csv.writer(fh, delimiter="\t").writerows(zip(users, items))
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
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    best_valid, _ = trainer.fit(train_data, valid_data, saved=True, show_progress=False)
    test = trainer.evaluate(test_data, load_best_model=True, show_progress=False)
    result = {
        "ndcg@10": float(test["ndcg@10"]),
        "recall@10": float(test["recall@10"]),
        "mrr@10": float(test["mrr@10"]),
        "best_valid": float(best_valid),
        # cur_step counts validations since the best one (eval_step is 1 here)
        "best_epoch": len(times) - 1 - int(trainer.cur_step),
        "epochs_run": len(times),
        "epoch_seconds": times,
        "model": args.model,
        "config": json.loads(args.config),
        "threads": args.threads,
        "measured_at": started,
    }
    (work / "recbole.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
