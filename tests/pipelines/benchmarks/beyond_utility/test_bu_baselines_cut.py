"""Baselines on cut histories (the history-length sweep): trained on each user's last n items, ranked
with exactly those n items, through `llmrec train`'s path, scored by the benchmark's score task."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from llmrec.pipelines.baselines.config import BaselinesConfig
from llmrec.pipelines.baselines.rank import cut_histories, run_baselines
from llmrec.pipelines.benchmarks.beyond_utility import BENCHMARK, plots
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig, UserSampling
from tests.conftest import require_data

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_history_cut_trains_and_ranks_on_the_last_n_items(tmp_path):
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    bcfg = BeyondUtilityConfig(users=UserSampling(n_users=5))
    samples, assets = BENCHMARK.build_samples(bcfg, data), BENCHMARK.assets(bcfg, data)
    ds = assets["dataset"]
    cands = plots.write_candidates(samples, tmp_path / "candidates.jsonl", assets)
    items = ds.write_items(tmp_path / "items.jsonl")
    cfg = BaselinesConfig(
        candidates=cands, score_options={"items": str(items), "k": 5}, out=tmp_path / "out",
        base={"data": {"format": "movielens-100k", "path": "ml-100k", "dir": str(data)}, "split": {"protocol": "loo"},
              "tracking": {"uri": f"sqlite:///{tmp_path}/ml.db", "artifact_root": str(tmp_path / "art")},
              "output": {"dir": str(tmp_path / "trained"), "export_embeddings": False}},
        models=[{"model": {"name": "mostpop"}, "history_cut": 3}, {"model": {"name": "mostpop"}}],
        tracking={"uri": f"sqlite:///{tmp_path}/ml.db", "artifact_root": str(tmp_path / "art"),
                  "experiment": "beyond-utility"})
    cut = pd.read_parquet(cut_histories(cfg.base, cfg.out, 3)["path"])
    assert cut.groupby("user_id").size().max() == 4  # 3 history items + the target
    last = {u: g.sort_values("timestamp", kind="stable")["item_id"].iloc[-1] for u, g in cut.groupby("user_id")}
    assert all(last[u] == seq[-1] for u, seq in ds.sequences.items())  # the targets are kept
    out = run_baselines(cfg)
    assert set(out) == {"mostpop-h3", "mostpop"}
    lines = [json.loads(x) for x in (tmp_path / "out" / "predictions_mostpop-h3.jsonl").read_text().splitlines()]
    assert len(lines) == 5 and all(len(x["ranked"]) == 10 for x in lines)
    assert out["mostpop-h3"]["arp"] != out["mostpop"]["arp"]  # popularity counted on cut histories differs
