"""GPU placement of engine actors: TP×PP bundles, restarts, and the refusals (no cluster needed)."""

from __future__ import annotations

import pytest

from llmrec.errors import ConfigError
from llmrec.pipelines.runner.placement import actor_resources, replica_bundles
from llmrec.config import validate
from llmrec.pipelines.runner.run_config import ExecutionConfig, RunConfig

BENCH = {"name": "prefeval", "task": "mcq"}


def _run(engine: dict, judge: dict | None = None, **ex) -> RunConfig:
    return validate(RunConfig, {"benchmark": BENCH, "engine": engine, "judge": judge, "execution": ex})


def test_tp_pp_replica_gets_a_placement_group_and_the_actor_no_gpu():
    cfg = _run({"type": "vllm", "model": "m", "tensor_parallel_size": 4, "pipeline_parallel_size": 2},
               num_gpus_per_worker=8, num_cpus_per_worker=4)
    res = actor_resources(cfg.engine, cfg.execution)
    assert res["num_gpus"] == 0 and res["num_cpus"] == 4 and callable(res["ray_remote_args_fn"])
    assert res["max_restarts"] == 3 and res["max_task_retries"] == -1
    assert replica_bundles(8, 4) == [{"GPU": 1, "CPU": 4}] + [{"GPU": 1, "CPU": 1}] * 7


def test_single_gpu_and_cpu_actors_reserve_directly():
    one = _run({"type": "vllm", "model": "m"}, num_gpus_per_worker=1)
    assert actor_resources(one.engine, one.execution) == {"num_cpus": 1.0, "num_gpus": 1.0, "max_restarts": 3,
                                                          "max_task_retries": -1}
    serve = _run({"type": "vllm", "model": "m"}, mode="serve", max_restarts=0)
    assert actor_resources(serve.engine, serve.execution)["num_gpus"] == 0
    assert actor_resources(serve.engine, serve.execution)["max_restarts"] == 0


def test_gpus_per_worker_must_equal_tp_times_pp():
    with pytest.raises(ConfigError, match=r"num_gpus_per_worker is 2 .* = 4 GPU"):
        _run({"type": "vllm", "model": "m", "tensor_parallel_size": 4}, num_gpus_per_worker=2)
    _run({"type": "vllm", "model": "m", "tensor_parallel_size": 4}, num_gpus_per_worker=4)


def test_judge_sharing_the_subject_gpu_at_high_utilisation_is_refused():
    subject = {"type": "vllm", "model": "m"}
    with pytest.raises(ConfigError, match=r"judge_replicas: 0 the judge shares the subject's GPU"):
        _run(subject, {"type": "vllm", "model": "j"}, num_gpus_per_worker=1, judge_replicas=0)
    _run(subject, {"type": "vllm", "model": "j"}, num_gpus_per_worker=1)  # default: the judge has its own actors
    _run(subject, {"type": "vllm", "model": "j"}, num_gpus_per_worker=1, mode="serve")  # separate deployments
    _run({**subject, "gpu_memory_utilization": 0.5}, {"type": "vllm", "model": "j", "gpu_memory_utilization": 0.4},
         num_gpus_per_worker=1, judge_replicas=0)


def test_judge_pool_gets_its_own_gpus_and_tp_pp_bundles():
    from llmrec.pipelines.runner.placement import judge_pool_resources, judge_pooled

    cfg = _run({"type": "vllm", "model": "m"}, {"type": "vllm", "model": "j", "tensor_parallel_size": 2},
               num_gpus_per_worker=1, judge_num_gpus_per_worker=2, judge_num_cpus_per_worker=3, judge_replicas=2)
    assert judge_pooled(cfg.judge, cfg.execution)
    res = judge_pool_resources(cfg.judge, cfg.execution)
    assert res == {"num_cpus": 3, "num_gpus": 0, "bundles": [{"GPU": 1, "CPU": 3}, {"GPU": 1, "CPU": 1}],
                   "max_restarts": 3}
    with pytest.raises(ConfigError, match=r"judge_num_gpus_per_worker is 1 but judge needs .* = 2 GPU"):
        _run({"type": "vllm", "model": "m"}, {"type": "vllm", "model": "j", "tensor_parallel_size": 2},
             num_gpus_per_worker=1, judge_num_gpus_per_worker=1)
    cpu = _run({"type": "fake"}, {"type": "fake"}, num_cpus_per_worker=2)  # defaults: the subject's per-worker keys
    assert judge_pool_resources(cpu.judge, cpu.execution) == {"num_cpus": 2, "num_gpus": 0, "bundles": None,
                                                              "max_restarts": 3}


def test_remote_or_unpooled_judges_stay_in_the_subject_actor():
    from llmrec.pipelines.runner.placement import judge_pooled

    remote = _run({"type": "fake"}, {"type": "openai", "model": "j"})
    assert not judge_pooled(remote.judge, remote.execution)
    for ex in ({"judge_replicas": 0}, {"mode": "serve"}):
        cfg = _run({"type": "fake"}, {"type": "fake"}, **ex)
        assert not judge_pooled(cfg.judge, cfg.execution)
    assert not judge_pooled(None, _run({"type": "fake"}).execution)


def test_max_restarts_default_is_bounded():
    assert ExecutionConfig().max_restarts == 3


def test_plan_line_says_where_the_judge_runs():
    from llmrec.pipelines.runner.placement import judge_placement

    vllm = {"type": "vllm", "model": "m"}
    own = _run(vllm, {"type": "vllm", "model": "j", "tensor_parallel_size": 2}, num_gpus_per_worker=1,
               judge_num_gpus_per_worker=2, judge_replicas=2)
    assert judge_placement(own.judge, own.execution) == ("judge: 2 vllm actor(s) of its own, each 2 bundle(s) "
                                                         "{GPU: 1, CPU: 1}; shares no GPU with the subject")
    remote = _run(vllm, {"type": "openai", "model": "j"}, num_gpus_per_worker=1)
    assert "inside each subject actor (a remote API)" in judge_placement(remote.judge, remote.execution)
    assert judge_placement(None, remote.execution) == "judge: none"


def test_shortfall_counts_the_judge_actors_and_their_bundles():
    from llmrec.pipelines.runner.placement import shortfalls

    cfg = _run({"type": "vllm", "model": "m"}, {"type": "vllm", "model": "j", "tensor_parallel_size": 2},
               num_gpus_per_worker=1, judge_num_gpus_per_worker=2, concurrency=6)
    assert shortfalls(cfg.engine, cfg.judge, cfg.execution, {"CPU": 64, "GPU": 8}) == []
    [gpu] = shortfalls(cfg.engine, cfg.judge, cfg.execution, {"CPU": 64, "GPU": 7})
    assert "6 subject actor(s) (1 GPU each) and 1 judge actor(s) (2 GPU each) need 8 GPU" in gpu
