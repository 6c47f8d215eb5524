"""The runner end to end on a local Ray with the scripted engine: stores, resume, cache,
faults, kill -9, MLflow contents. (The real model runs in tests/pipelines/benchmarks/prefeval.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from llmrec.pipelines.common.store import ResultStore
from tests.conftest import REPO
from tests.pipelines.conftest import config

pytestmark = [pytest.mark.slow, pytest.mark.model]


def predictions(run_dir: Path) -> dict[str, tuple]:
    recs = ResultStore(run_dir / "results").load()
    return {k: (r["status"], r.get("output"), r.get("correct")) for k, r in recs.items()}


def test_run_resume_and_cached_rerun(tmp_path, data_root, local_ray):
    cfg = load_run_config(config(tmp_path))
    first = run_evaluation(cfg, data_root)
    n = 2 * 2 * 2 * 2 * 2  # topics x forms x pairs x turns x methods
    assert first.metrics["n_samples"] == n and first.metrics["n_answered"] == n
    assert first.stats["samples_new"] == n
    # explicit pref replies are deduplicated by the cache across turns/methods
    assert first.stats["engine_calls"] < n + n / 2
    store = ResultStore(first.run_dir / "results")
    assert len(store.load()) == n
    # metrics equal a recomputation from the predictions file (the score contract)
    from llmrec.pipelines.runner.scoring import score_file

    scored = score_file("prefeval-mcq", first.files["predictions"])
    assert scored["metrics"]["accuracy"] == pytest.approx(first.metrics["accuracy"])
    # same config again: everything resumes from the store, no engine call
    again = run_evaluation(cfg, data_root)
    assert again.stats["samples_new"] == 0 and again.stats["samples_resumed"] == n
    assert again.metrics["accuracy"] == first.metrics["accuracy"]
    # fresh store, warm request cache: zero engine calls, identical results
    fresh = run_evaluation(load_run_config(config(tmp_path), ["output.resume=false"]), data_root)
    assert fresh.stats["engine_calls"] == 0 and fresh.stats["cache_hits"] > 0
    assert predictions(fresh.run_dir) == predictions(first.run_dir)
    # MLflow: a parent run with one child per setting, re-used by the resume; the fresh start (a new store) gets
    # its own MLflow run (a fresh start keeps no record of the directory's earlier results)
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlruns.db")
    exp = mlflow.get_experiment_by_name("prefeval")
    runs = mlflow.search_runs([exp.experiment_id], output_format="list")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 2 and len(children) == 2 * (2 * 2 * 2)  # forms x turns x methods, per parent
    p = parents[0]
    assert p.data.metrics["accuracy"] == pytest.approx(first.metrics["accuracy"])
    assert "accuracy_ci_low" in p.data.metrics and p.data.params["engine.type"] == "fake"
    assert p.data.tags["git_commit"] and p.data.tags["data_fingerprint"]
    protocol = json.loads(p.data.tags["protocol"])  # the reference's MCQ defaults, recorded with the run
    assert (protocol["constrain_choice"], protocol["answer_max_tokens"], protocol["pref_reply_max_tokens"]) == (False, 5, None)
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(p.info.run_id)}
    assert {"samples.parquet", "resolved.yaml", "metrics.json", "accuracy_by_turns.png"} <= arts
    # the rule for "Las Vegas" questions fired where the question mentions it
    recs = ResultStore(first.run_dir / "results").load().values()
    assert any(r["output"] == "<choice>C</choice>" for r in recs)


def test_engine_failures_are_recorded_and_retried_on_resume(tmp_path, data_root, local_ray):
    bad = {"type": "fake", "fail_first": 1000}
    cfg = load_run_config(config(tmp_path, engine=bad, forms=["choice"], turns=[0], methods=["zero-shot"]),
                          ["execution.retries=1"])
    out = run_evaluation(cfg, data_root)
    assert out.metrics["failed"] == 4 and out.metrics["n_answered"] == 0
    recs = ResultStore(out.run_dir / "results").load()
    assert all("fake failure" in r["error"] for r in recs.values())
    # fix the engine (same run dir via run_name): failed samples are sent again, not duplicated
    good = load_run_config(config(tmp_path, name="d.yaml", forms=["choice"], turns=[0], methods=["zero-shot"]),
                           [f"output.run_name={out.run_dir.name}"])
    out2 = run_evaluation(good, data_root)
    assert out2.metrics["failed"] == 0 and out2.metrics["n_answered"] == 4
    assert len(ResultStore(out2.run_dir / "results").load()) == 4


def test_over_context_is_reported_not_truncated(tmp_path, data_root, local_ray):
    eng = {"type": "fake", "context_length": 400}
    cfg = load_run_config(config(tmp_path, engine=eng, forms=["choice"], turns=[0, 2], methods=["zero-shot"]))
    out = run_evaluation(cfg, data_root)
    recs = ResultStore(out.run_dir / "results").load().values()
    over = [r for r in recs if r["status"] == "over_context"]
    assert over and all(r["turns"] == 2 for r in over) and all(r["prompt_tokens"] > 400 for r in over)
    assert out.metrics["over_context"] == len(over)
    assert out.metrics["n_answered"] == out.metrics["n_samples"] - len(over)


def _cli(cfg: Path, data_root: Path, *sets: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "LLMREC_DATA_DIR": str(data_root), "PYTHONUNBUFFERED": "1"}
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.Popen([sys.executable, "-m", "llmrec.cli", "run", str(cfg), *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, **kw)


def test_kill_9_then_resume_equals_uninterrupted(tmp_path, data_root, local_ray):
    """kill -9 of `llmrec run` mid-run, then the same config again: nothing lost, nothing written twice, the same
    predictions and metrics as an uninterrupted run. The killed run is a process of its own (kill -9 needs one); the
    resume (the same config again) and the reference are `run_evaluation` on the shared local Ray (what resumes is
    the run, not the CLI around it); the reference without the engine's pause (a pause before each reply, not part
    of the reply)."""
    slow = {"type": "fake", "delay_s": 0.25, "rules": [{"contains": "hotel", "reply": "<choice>B</choice>"}]}
    ref_dir, cut_dir = tmp_path / "ref", tmp_path / "cut"
    ref_dir.mkdir(), cut_dir.mkdir()
    ref_cfg, cut_cfg = config(ref_dir, engine=slow), config(cut_dir, engine=slow)
    # one prefix group (4 samples) per batch: 8 batches, each written when it finishes; killed after the second
    one_group = "execution.batch_size=1"
    proc = _cli(cut_cfg, data_root, one_group)
    results = None
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:  # a run that ended early: its output says why
        runs = list((cut_dir / "runs").glob("*/results/*.parquet"))
        if len(runs) >= 2:
            results = runs[0].parent
            break
        time.sleep(0.2)
    assert results is not None, proc.communicate()[0].decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(ResultStore(results).load())
    total = 2 * 2 * 2 * 2 * 2  # topics x forms x pairs x turns x methods
    assert 0 < partial < total
    done_cfg, ref_cfg = load_run_config(cut_cfg, [one_group]), load_run_config(ref_cfg, ["engine.delay_s=0"])
    done, ref = run_evaluation(done_cfg, data_root), run_evaluation(ref_cfg, data_root)
    assert Path(done.run_dir) == results.parent and done.stats["samples_new"] > 0
    # what makes `llmrec run` exit 0: no more failed samples than the config allows
    assert not done.failures.exceeds(done_cfg.execution.max_failed_share)
    assert not ref.failures.exceeds(ref_cfg.execution.max_failed_share)
    cut_preds = predictions(results.parent)
    ref_preds = predictions(Path(ref.run_dir))
    assert len(cut_preds) == total and cut_preds == ref_preds
    # no duplicates: across all shards of the interrupted+resumed run, each sample was written once
    import pyarrow.parquet as pq

    ids = [i for shard in ResultStore(results).shards() for i in pq.read_table(results / shard).column("sample_id").to_pylist()]
    assert len(ids) == len(set(ids)) == total
    metrics = json.loads((results.parent / "metrics.json").read_text())
    ref_metrics = json.loads((Path(ref.run_dir) / "metrics.json").read_text())
    # the same numbers; the cost ledger (cost/: times held, engine seconds) is the runs' own
    assert {k: v for k, v in metrics.items() if not k.startswith("cost/")} == \
        {k: v for k, v in ref_metrics.items() if not k.startswith("cost/")}


def test_serve_mode_gives_the_same_results(tmp_path, data_root, local_ray):
    kw = dict(forms=["explicit"], turns=[0, 2], methods=["zero-shot"])
    actors = run_evaluation(load_run_config(config(tmp_path, **kw), ["output.cache=false", "output.run_name=a"]),
                            data_root)
    served = run_evaluation(load_run_config(config(tmp_path, **kw), ["output.cache=false", "output.run_name=s",
                                                                     "execution.mode=serve"]), data_root)
    assert served.stats["engine_calls"] > 0 and served.stats["cache_hits"] == 0
    assert predictions(served.run_dir) == predictions(actors.run_dir)
    assert served.metrics == actors.metrics
