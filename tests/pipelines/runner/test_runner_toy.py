"""The real runner (plan → Ray Data → store → aggregate → MLflow) on the fake engine and a
toy benchmark written in tests: per-sample failures, missing keys, over-context, truncation,
loop stages, resume. No data files, fast tier."""

from __future__ import annotations

import time
import warnings

import pytest
import yaml

from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.worker import process_samples
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.serving.engine import build_engine
from tests.pipelines.toy.benchmark import NAME


def run_config(tmp_path, engine=None, **bench) -> RunConfig:
    return RunConfig.model_validate({
        "benchmark": {"name": NAME, **bench},
        "engine": engine or {"type": "fake", "context_length": 60, "default": "yes"},
        "execution": {"batch_size": 2, "backoff_s": 0.01, "retries": 1},
        "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")},
    })


def direct(cfg_data: dict, engine: dict | None = None) -> dict[str, dict]:
    """The worker without Ray: every stage over one batch of samples."""
    bench = get_benchmark(NAME)
    cfg = benchmark_config({"name": NAME, **cfg_data})
    eng = build_engine(engine or {"type": "fake", "context_length": 60, "default": "yes"})
    samples = bench.build_samples(cfg, None)
    out = process_samples(bench, cfg, samples, lambda role: eng, retries=1, backoff_s=0.0)
    return {s["sample_id"]: s for s in out}


def test_failures_stay_with_their_sample():
    got = direct({"n": 6, "long": [1], "bad_render": [2], "bad_score": [3], "no_text": [4]})
    assert got["toy-0"]["status"] == "ok" and got["toy-0"]["follow_ups"] == ["yes", "yes"]
    assert got["toy-5"]["status"] == "ok" and got["toy-5"]["correct"] is True
    long = got["toy-1"]
    assert long["status"] == "over_context" and long["failed_stage"] == "ask" and long["prompt_tokens"] > 60
    assert "follow_ups" not in long  # later stages skipped
    bad = got["toy-2"]
    assert bad["status"] == "failed" and bad["failed_stage"] == "ask"
    assert "render raised ValueError: cannot render sample 2" in bad["error"]
    assert got["toy-3"]["status"] == "failed" and got["toy-3"]["failed_stage"] == "score"
    assert "KeyError" in got["toy-3"]["error"]
    miss = got["toy-4"]
    assert miss["status"] == "failed" and miss["failed_stage"] == "ask"
    assert "reads field(s) ['text'] missing from sample 'toy-4'" in miss["error"] and "'index'" in miss["error"]
    assert miss["missing"] == ["text"]


def test_truncation_policy_shrinks_until_it_fits():
    got = direct({"n": 2, "long": [1], "truncate": True})
    s = got["toy-1"]
    assert s["status"] == "ok" and s["truncation_steps"]["ask"] >= 1
    assert s["outputs"]["ask"]["prompt_tokens"] <= 60


def test_undeclared_output_key_fails_the_sample():
    bench = get_benchmark(NAME)
    cfg = benchmark_config({"name": NAME, "n": 1, "rounds": 0})
    stages = bench.stages(cfg)
    sneaky = type(stages[0])(**{**stages[0].__dict__, "accept": lambda s, r: {"answer": r.text, "extra": 1}})
    fake = type("B", (type(bench),), {"stages": lambda self, c: [sneaky]})()
    eng = build_engine({"type": "fake", "default": "yes"})
    [s] = process_samples(fake, cfg, bench.build_samples(cfg, None), lambda r: eng)
    assert s["status"] == "failed" and "returned undeclared field(s) ['extra']" in s["error"]


def test_runner_end_to_end_with_failures_and_resume(tmp_path, local_ray):
    cfg = run_config(tmp_path, n=8, long=[1], bad_render=[2], no_text=[4])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = run_evaluation(cfg)
    # Ray's deprecation of map_batches' **ray_remote_args is not the user's to act on (see placement.py)
    assert not [w for w in caught if "ray_remote_args" in str(w.message)], [str(w.message) for w in caught]
    assert first.headline == ("accuracy", "failed")
    assert first.metrics["n_samples"] == 8 and first.metrics["failed"] == 2 and first.metrics["over_context"] == 1
    assert first.metrics["accuracy"] == 1.0
    recs = ResultStore(first.run_dir / "results").load()
    assert sorted(recs) == [f"toy-{i}" for i in range(8)]
    assert recs["toy-6"]["follow_ups"] == ["yes", "yes"]
    # 5 ok samples x (1 ask + 2 rounds) + the over-long prompt (counted, over_context) = engine calls
    assert first.stats["samples_new"] == 8
    # seconds per phase: the workers report their engine start and compute, the driver the rest
    t = first.stats
    assert t["time_worker_s"] > 0 and t["time_engine_start_s"] >= 0 and t["time_plan_s"] > 0
    assert t["time_first_batch_s"] <= t["time_stream_s"]
    assert t["time_worker_s"] + t["time_engine_start_s"] + t["time_store_write_s"] <= t["time_stream_s"] + 1.0
    # resume: ok and over_context are final; the two failed samples are retried (and fail again)
    again = run_evaluation(cfg)
    assert again.stats["samples_resumed"] == 6 and again.stats["samples_new"] == 2
    assert again.metrics == first.metrics
    # the cost ledger counts the whole run: the two retried samples fail before any engine call, so no token is added,
    # while the engines held for the second invocation are
    assert again.cost["cost/prompt_tokens"] == first.cost["cost/prompt_tokens"] > 0
    assert again.cost["cost/reserved_cpu_seconds"] > first.cost["cost/reserved_cpu_seconds"]
    # MLflow: the experiment opens on the runs table with the headline metrics as columns
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    exp = client.get_experiment_by_name("toy")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    assert "metrics.`accuracy`" in exp.tags["mlflow.sharedViewState.llmrec-headline"]
    runs = client.search_runs([exp.experiment_id])
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parent) == 1 and len(children) == 2
    # readable names (the config hash is a tag) and the run's real wall clock, not the instant of logging
    assert parent[0].info.run_name == "toy · fake-model"
    assert sorted(c.info.run_name for c in children) == ["kind=even · toy · fake-model", "kind=odd · toy · fake-model"]
    assert first.run_dir.name.endswith(parent[0].data.tags["llmrec.config_hash"])
    assert parent[0].info.end_time - parent[0].info.start_time >= 1000 * first.stats["time_stream_s"]
    assert parent[0].data.tags["llmrec.headline"] == "accuracy,failed"
    assert parent[0].data.metrics["accuracy"] == 1.0
    assert parent[0].data.metrics["time_worker_s"] > 0  # the phase timings are logged with the run
    assert parent[0].data.tags["model"] == "fake-model"
    assert {c.data.tags["llmrec.setting"] for c in children} == {"kind=even", "kind=odd"}
    # the run directory as `llmrec leaderboard` and `llmrec report` read it
    from llmrec.pipelines.results.html_report import drill_rows
    from llmrec.pipelines.results.leaderboard import leaderboard, load_entries

    board = leaderboard([first.run_dir]).set_index("metric")
    assert board.loc["accuracy", "subject"] == "fake-model" and board.loc["accuracy", "value"] == 1.0
    # the toy computes no CI: the leaderboard bootstraps one over the answered samples (all right: zero width)
    assert board.loc["accuracy", "ci_source"] == "cluster bootstrap" and board.loc["accuracy", "ci_low"] == 1.0
    assert board.loc["accuracy", "n"] == 5 and board.loc["failed", "value"] == 2 and board.loc["failed", "n"] == 8
    rows, total = drill_rows(load_entries([first.run_dir])[0], 3)
    assert total == 8 and sorted(r["status"] for r in rows) == ["failed", "failed", "over_context"]  # not ok first
    assert {r["setting"] for r in rows} <= {"kind=even", "kind=odd"}


def test_the_runs_dataset_reserves_nothing_between_operators(tmp_path, local_ray, monkeypatch):
    """One operator holds the run's resources: Ray Data's per-operator reservation (recomputed on every step of its
    scheduling loop) is off for the run's dataset, and the process's DataContext, which other Ray Data users share,
    is untouched."""
    from ray.data import DataContext
    from ray.data._internal.execution import resource_manager

    allocators = []
    init = resource_manager.ResourceManager.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        allocators.append(self._op_resource_allocator)

    monkeypatch.setattr(resource_manager.ResourceManager, "__init__", spy)
    out = run_evaluation(run_config(tmp_path, n=4))
    assert out.metrics["n_samples"] == 4
    assert allocators == [None]
    assert DataContext.get_current().op_resource_reservation_enabled is True


def test_resume_redoes_the_samples_of_a_truncated_shard(tmp_path, local_ray):
    import pyarrow.parquet as pq

    cfg = run_config(tmp_path, n=4, rounds=0)
    first = run_evaluation(cfg)
    results = first.run_dir / "results"
    shard = sorted(results.glob("*.parquet"))[0]
    lost = pq.read_table(shard).num_rows
    shard.write_bytes(shard.read_bytes()[:64])  # a copy cut short outside llmrec
    again = run_evaluation(cfg)
    assert again.stats["samples_new"] == lost and again.stats["samples_resumed"] == 4 - lost
    assert again.metrics == first.metrics and sorted(ResultStore(results).load()) == [f"toy-{i}" for i in range(4)]
    assert (results / f"{shard.name}.corrupt").is_file()


def test_cli_run_exits_1_when_every_sample_failed(tmp_path, local_ray):
    """A server that refuses every request: the run is stored (resume works) but it is not a success."""
    from typer.testing import CliRunner

    from llmrec.cli import app

    cfg = run_config(tmp_path, engine={"type": "fake", "fail_first": 10_000}, n=3, rounds=0)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    res = CliRunner().invoke(app, ["run", str(path)])
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert "error: 3 of 3 samples failed (100%" in text and "[ask] EngineError: fake failure" in text
    run_dir = next((tmp_path / "runs").glob("*/results"))
    assert {r["status"] for r in ResultStore(run_dir).load().values()} == {"failed"}


def test_cli_run_prints_a_compact_result_and_verbose_all(tmp_path, local_ray):
    """`llmrec run`: the headline metrics, counts and failures; timings and the rest only with --verbose."""
    from typer.testing import CliRunner

    from llmrec.cli import app

    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(run_config(tmp_path, n=4, bad_render=[2]).model_dump(mode="json")))
    out = CliRunner().invoke(app, ["run", str(path), "--max-failed-share", "0.5"])  # 1 of 4 fails on purpose
    assert out.exit_code == 0, out.output
    table = out.stdout.split("results")[1]
    for key in ("accuracy", "failed", "n_samples", "over_context", "samples_new"):
        assert key in table, key
    assert "time_" not in out.stdout and "engine_calls" not in out.stdout and "--verbose" in out.stdout
    assert len(table.splitlines()) < 20
    verbose = CliRunner().invoke(app, ["run", str(path), "--verbose", "--max-failed-share", "0.5"])
    assert verbose.exit_code == 0 and "time_worker_s" in verbose.stdout and "engine_calls" in verbose.stdout


@pytest.mark.parametrize("bad", [{"n": 0}, {"rounds": -1}])
def test_toy_config_is_validated(bad):
    from llmrec.errors import ConfigError

    with pytest.raises(ConfigError, match="benchmark"):
        benchmark_config({"name": NAME, **bad})


def _pids(run_dir, key: str) -> list[tuple[str, str]]:
    """(subject pid, judge pid) per sample, read from the fake engines' ' pid=N' reply suffix."""
    recs = ResultStore(run_dir / "results").load()
    assert all(r["status"] == "ok" for r in recs.values())
    return [(r["answer"].rsplit("pid=", 1)[1], r[key].rsplit("pid=", 1)[1]) for r in recs.values()]


@pytest.mark.slow
@pytest.mark.integration
def test_judge_runs_in_its_own_actor_process(tmp_path, local_ray):
    """Actors mode: the judge gets its own engine actor (execution.judge_replicas, default 1), started
    and removed by the run; judge_replicas 0 puts it back into the subject actor."""
    import ray

    def cfg(name: str, **ex) -> RunConfig:
        c = run_config(tmp_path, engine={"type": "fake", "default": "yes", "report_pid": True},
                       n=4, rounds=0, judged=True).model_dump(mode="json")
        c["judge"] = {"type": "fake", "default": "fine", "report_pid": True}
        c["execution"].update(ex)
        c["output"].update(run_name=name, cache=False)  # no cached answer carries another run's pid
        return RunConfig.model_validate(c)

    pooled = _pids(run_evaluation(cfg("pooled")).run_dir, "verdict")
    assert len(pooled) == 4
    subject_pids, judge_pids = {s for s, _ in pooled}, {j for _, j in pooled}
    assert not subject_pids & judge_pids and len(judge_pids) == 1  # one judge actor, not the subject's process
    total = ray.cluster_resources()["CPU"]
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0.0) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0.0) == total  # the judge pool was removed with the run
    inside = _pids(run_evaluation(cfg("inside", judge_replicas=0)).run_dir, "verdict")
    assert all(s == j for s, j in inside)
