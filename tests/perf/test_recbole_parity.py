"""perf/recbole_parity.py without RecBole: configs per operating point, the seed summary, the table row."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "recbole_parity.py"


@pytest.fixture(scope="module")
def parity():
    spec = importlib.util.spec_from_file_location("recbole_parity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_five_models_and_two_operating_points(parity):
    assert set(parity.SPECS) == {"bpr", "neumf", "lightgcn", "sasrec", "gru4rec"}
    budget = parity.recbole_config("bpr", "budget", 2021, 60)
    assert budget["epochs"] == 60 and budget["valid_metric"] == "NDCG@10" and budget["stopping_step"] > 1000
    assert budget["eval_args"]["split"] == {"RS": [0.8, 0.1, 0.1]} and budget["seed"] == 2021
    default = parity.recbole_config("sasrec", "recbole", 2020, 300)
    assert default["epochs"] == 300 and default["stopping_step"] == 10 and default["valid_metric"] == "MRR@10"
    assert default["eval_args"]["order"] == "TO" and default["train_neg_sample_args"] is None


def test_summary_gives_mean_std_noise_test_and_time_ratio(parity):
    rb = [{"ndcg@10": v, "recall@10": v, "epoch_seconds": [2.0, 2.0], "epochs_run": 2, "measured_at": "T"}
          for v in (0.29, 0.30, 0.31)]
    us = [{"ndcg@10": v, "recall@10": v, "epoch_seconds": [1.0], "epochs_run": 1} for v in (0.295, 0.30, 0.305)]
    row = parity.summarize("bpr", "budget", 2, rb, us)
    assert row["ndcg@10"]["recbole"]["mean"] == pytest.approx(0.30)
    assert row["ndcg@10"]["recbole"]["std"] == pytest.approx(0.01)
    assert row["ndcg@10"]["welch_p"] > 0.05 and row["time_ratio"] == pytest.approx(0.5)
    line = parity.table_row(row)
    assert "0.3000 ± 0.0100" in line and "yes (p=" in line and "| 0.50 |" in line and "| T |" in line


def _result_file(path: Path, parity, seeds: list[int], values: list[float]) -> Path:
    import json

    rb = [{"ndcg@10": v, "recall@10": v, "epoch_seconds": [2.0], "epochs_run": 1, "measured_at": "T", "seed": s}
          for s, v in zip(seeds, values)]
    us = [{"ndcg@10": v, "recall@10": v, "epoch_seconds": [1.0], "epochs_run": 1, "seed": s}
          for s, v in zip(seeds, values)]
    row = parity.summarize("gru4rec", "budget", 10, rb, us) | {"runs": {"recbole": rb, "llmrec": us},
                                                               "train_samples": "prefix"}
    path.write_text(json.dumps([row]))
    return path


def test_combine_pools_seeds_of_several_files_and_refuses_a_seed_twice(parity, tmp_path, capsys):
    import json

    a = _result_file(tmp_path / "a.json", parity, [2020, 2021, 2022], [0.04, 0.05, 0.06])
    b = _result_file(tmp_path / "b.json", parity, [2023, 2024], [0.045, 0.055])
    out = tmp_path / "pooled.json"
    parity.combine([a, b], out)
    (row,) = json.loads(out.read_text())
    assert row["seeds"] == 5 and row["train_samples"] == "prefix"
    assert row["ndcg@10"]["recbole"]["mean"] == pytest.approx(0.05)
    assert sorted(r["seed"] for r in row["runs"]["llmrec"]) == [2020, 2021, 2022, 2023, 2024]
    assert "| gru4rec | budget | 5 |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="seed 2021 is already"):
        parity.combine([a, _result_file(tmp_path / "c.json", parity, [2021], [0.05])], out)
