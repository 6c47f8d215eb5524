"""A few MovieLens-100K users end to end: the embedded CPU model extracts, judges and maps
categories, on a local Ray, logged to MLflow (slow: a real model on CPU)."""

from __future__ import annotations

import json

import pytest
import yaml

from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from llmrec.pipelines.runner.scoring import score_file
from llmrec.pipelines.common.store import ResultStore
from tests.conftest import require_data

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.timeout(3600)]


LLAMA = {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1}


def run(tmp_path, root, engine: dict, tracking: bool = True, **bench):
    cfg = {
        "benchmark": {
            "name": "gistbench", "dataset": "ml-100k", "model_label": "gemma-3-270m",
            # small enough for a 270M base model on two shared cores; json_schema off because
            # grammar-constrained sampling over Gemma's 262k-token vocabulary is very slow on CPU
            "extraction": {"chunk_sizes": [6], "max_history": 6, "max_tokens": 64, "json_schema": False},
            "judge": {"retries": 0, "max_tokens": 16},
            "specificity": {"pool_size": 20, "test_set_size": 6, "max_backing": 2, "max_tokens": 16},
            "taxonomy": {"cache_path": str(tmp_path / "taxonomy.sqlite"), "max_tokens": 16},
            **bench,
        },
        "engine": engine, "judge": LLAMA,
        "execution": {"batch_size": 2, "backoff_s": 0.01},
        "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "mlartifacts"),
                     "enabled": tracking},
    }
    path = tmp_path / "gistbench.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return run_evaluation(load_run_config(path), root)


@pytest.fixture
def root():
    pytest.importorskip("llama_cpp")
    require_data("gistbench", "gistbench", "assets", "categories.csv")
    return require_data("ml-100k", "u.data").parents[1]


def test_movielens_users_with_the_embedded_model(tmp_path, root, local_ray):
    out = run(tmp_path, root, LLAMA, users=2)
    m = out.metrics
    assert m["n_users"] + m["users_failed"] == 2
    for key in ("ig_p_mean", "ig_f1_median", "is_mean", "hm_median"):
        assert 0.0 <= m[key] <= 1.0
    # every chunk was either parsed or recorded as failed; the user survived either way
    lines = [json.loads(x) for x in out.files["predictions"].read_text().splitlines()]
    assert {x["user_id"] for x in lines} and all(x["model"] == "gemma-3-270m" for x in lines)
    rescored = score_file("gistbench", out.files["predictions"], {"model": "gemma-3-270m"})["metrics"]
    assert rescored["ig_f1_mean"] == pytest.approx(m["ig_f1_mean"]) and rescored["is_mean"] == pytest.approx(m["is_mean"])
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlruns.db")
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("gistbench").experiment_id], output_format="list")
    assert len(runs) == 1 and "ig_f1_median" in runs[0].data.metrics
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(runs[0].info.run_id)}
    assert {"predictions.jsonl", "samples.parquet", "gistbench_scores.png"} <= arts


def test_embedded_model_judges_and_maps_scripted_interests(tmp_path, root, local_ray):
    """A scripted extractor cites the user's six most recent movies, so every judge step
    (IG filter, overlap filter, IS retrieval, taxonomy) runs on the embedded model."""
    from llmrec.pipelines.registry import benchmark_config, get_benchmark

    bench = {"user_ids": ["1"], "model_label": "scripted"}
    cfg = benchmark_config({"name": "gistbench", "dataset": "ml-100k", "taxonomy": {"mapper": "none"},
                            "extraction": {"chunk_sizes": [6], "max_history": 6}, **bench})
    history = get_benchmark("gistbench").build_samples(cfg, root)[0]["_chunks"][0]
    ids = [e["object_id"] for e in history]
    reply = json.dumps([{"interest": "Classic Hollywood Films", "item_ids": ids}])
    out = run(tmp_path, root, {"type": "fake", "default": reply}, tracking=False, **bench)  # MLflow: the test above
    rec = ResultStore(out.run_dir / "results").load()["ml-100k/1"]
    assert rec["status"] == "ok", rec.get("error")
    assert set(rec["outputs"]) == {"extract", "judge", "specificity", "taxonomy"}
    judged = rec["judge"]["Classic Hollywood Films"]
    assert judged["state"] in ("ok", "missed") and set(judged["answer"] or []) <= set(ids)
    probe = rec["specificity"]["Classic Hollywood Films"]
    assert len(probe["backing"]) == 2 and len(probe["test_ids"]) == 6
    scored = rec["interests_scored"][0]
    assert 0 <= scored["correct"] <= scored["backing"] == 2
    assert isinstance(rec["categories"]["Classic Hollywood Films"], int)
    assert 0.0 <= out.metrics["ig_p_mean"] <= 1.0
