"""The real vLLM code path on CPU (vllm-cpu in .venv-vllm; run with `make test-vllm`).

PrefEval MCQ demo slice through ``engine.type: vllm`` (the embedded Gemma 3 270M converted to
HF format): actors mode (AsyncLLM in the Ray Data actor) with the EngineCore killed mid-run —
the actor must be restarted and its samples redone — and serve mode (``ray.serve.llm``).
The scale model (``scale-llama``) at ~16k-token contexts with a KV budget that forces packing,
checked with vLLM's own counters. Skipped where vllm is not installed (the main venv).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
import time

import pytest

from llmrec.config import validate
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import RunConfig
from tests.conftest import require_data

pytestmark = [pytest.mark.vllm_cpu, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                 reason="needs vllm-cpu: `make test-vllm` builds .venv-vllm and runs these tests")]

ENGINE = {"type": "vllm", "model": "embedded", "dtype": "float32", "enforce_eager": True, "max_model_len": 4096}


def _config(tmp_path, mode: str) -> RunConfig:
    return validate(RunConfig, {
        "benchmark": {"name": "prefeval", "task": "mcq", "topics": ["travel_restaurant"], "forms": ["explicit"],
                      "turns": [2], "methods": ["zero-shot"], "per_topic": 3, "pref_reply_max_tokens": 16,
                      # not the reference defaults (free-form, 5 tokens): the base model needs closed choices
                      "constrain_choice": True, "answer_max_tokens": 16},
        "engine": ENGINE,
        "execution": {"mode": mode, "batch_size": 1, "backoff_s": 0.01},
        "ray": {"num_cpus": 4},
        "output": {"dir": str(tmp_path / "runs"), "cache": False},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "mlartifacts")}})


@pytest.fixture(scope="module")
def _module_ray():
    """One local Ray for the module's tests (each test's engines and Serve apps are its own: see ``ray_here``)."""
    import ray

    for attempt in range(2):  # on a crowded shared machine the raylet can miss its start-up deadline once
        try:
            # engine actors at niceness 0 as `llmrec run` starts them (Ray's default 15 starves them on a busy node)
            # 8 logical CPUs: two ray.serve.llm replicas take two each, their ingress and model-file tasks one each
            ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False,
                     _system_config={"worker_niceness": 0})
            break
        except Exception:  # noqa: BLE001 - Ray raises a bare Exception for a start-up timeout
            ray.shutdown()
            if attempt:
                raise
    yield
    ray.shutdown()


@pytest.fixture()
def ray_here(_module_ray):
    yield
    from ray import serve

    serve.shutdown()  # the test's Serve applications and controller go with it; the next test starts its own


def _engine_cores() -> dict[int, object]:
    """vLLM EngineCore processes started by this test (descendants of this process only)."""
    import psutil

    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            if "EngineCore" in " ".join(p.cmdline()) or "EngineCore" in p.name():
                out[p.pid] = p
        except psutil.Error:
            continue
    return out


def _check_outputs(outcome, n: int) -> None:
    recs = ResultStore(outcome.run_dir / "results").load()
    assert len(recs) == n and all(r["status"] == "ok" for r in recs.values()), recs
    assert all(r["output"] in {f"<choice>{c}</choice>" for c in "ABCD"} for r in recs.values())
    for name in ("samples.parquet", "predictions.jsonl", "metrics.json"):
        assert (outcome.run_dir / name).is_file(), name
    assert outcome.metrics["n_answered"] == n
    # cached-token counts are read from vLLM (test_prefix_cache_reuse_is_counted shows them non-zero)
    assert outcome.stats["prompt_tokens"] > 0 and 0.0 <= outcome.stats["prefix_cache_hit_rate"] <= 1.0


def test_actors_mode_recovers_from_a_killed_engine(tmp_path, ray_here):
    require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json")
    cfg = _config(tmp_path, "actors")
    seen, killed = set(), []
    stop = threading.Event()

    def killer():  # kill the first EngineCore once the first batch is stored: the next batch hits a dead engine
        store = tmp_path / "runs"
        while not stop.is_set():
            cores = _engine_cores()
            seen.update(cores)
            if not killed and cores and any(store.rglob("*.parquet")):
                pid, proc = next(iter(cores.items()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.5)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    t0 = time.perf_counter()
    try:
        outcome = run_evaluation(cfg)
    finally:
        stop.set()
        t.join(5)
    print(f"\n[vllm-cpu] actors mode (with one EngineCore killed and the actor restarted): "
          f"{time.perf_counter() - t0:.1f}s for 3 samples; stats {outcome.stats}")
    _check_outputs(outcome, 3)
    assert killed, "the EngineCore was never seen running"
    assert len(seen - set(killed)) >= 1, "no new EngineCore after the kill: the actor was not restarted"


def test_serve_mode_through_ray_serve_llm(tmp_path, ray_here):
    require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json")
    t0 = time.perf_counter()
    outcome = run_evaluation(_config(tmp_path, "serve"))
    print(f"\n[vllm-cpu] serve mode (ray.serve.llm deploy + run): {time.perf_counter() - t0:.1f}s for 3 samples; "
          f"stats {outcome.stats}")
    _check_outputs(outcome, 3)


def _shared_prefix_requests():
    from llmrec.types import Message, Request, SamplingParams

    shared = "The quick brown fox jumps over the lazy dog. " * 200  # ~2,000 tokens
    return [Request(messages=[Message(role="user", content=shared + f"Question {i}: which animal?")],
                    sampling=SamplingParams(max_tokens=4, temperature=0)) for i in range(3)]


def _assert_followers_hit(results) -> None:
    # one call, three prompts sharing ~2,000 tokens: the first computes the prefix, the other two
    # start once it is cached (shared_prefix_first) and read it from vLLM's prefix cache
    assert results[0].cached_prompt_tokens == 0, results
    assert all(r.cached_prompt_tokens >= 1024 for r in results[1:]), results


def test_prefix_cache_reuse_is_counted(ray_here):
    """Actors-mode engine (AsyncLLM): three requests sharing a prefix, the cached-token counts read from vLLM
    (num_cached_tokens), and the KV capacity vLLM allocated. The same counts through a ray.serve.llm app
    (usage.prompt_tokens_details) are asserted by test_serve_mode_routes_a_prefix_group_to_the_replica_that_holds_it,
    whose followers must read their leader's prefix from the cache; a second Serve app here cost ~45 s."""
    from llmrec.serving.engine import build_engine

    engine = build_engine({**ENGINE})
    engine.start()
    try:
        cache, cap = engine._llm.vllm_config.cache_config, engine.kv_capacity()  # what vLLM allocated
        assert cap.source == "measured by vLLM at start" and cap.block_tokens == cache.block_size
        assert 0 < cap.tokens <= cache.num_gpu_blocks * cache.block_size
        _assert_followers_hit(engine.generate(_shared_prefix_requests()))
    finally:
        engine.close()


def test_scale_model_packed_to_the_kv_budget_runs_without_preemption(tmp_path, ray_here):
    """~16k-token PrefEval prompts (implicit preference, 3 pairs x 2 turn settings: ~10k and ~18k
    tokens, answers of 300 tokens) on the scale model with 350 KV blocks of 128 tokens: the three prefix groups (~19k
    tokens each) do not fit one batch, so the packer splits them. vLLM's counters: no preemption,
    and the follower of each prefix group reads the leader's prefix from the cache."""
    require_data("prefeval", "benchmark_dataset", "implicit_preference")
    budget, counters = 350 * 128, tmp_path / "counters"
    cfg = validate(RunConfig, {
        "benchmark": {"name": "prefeval", "task": "gen", "forms": ["persona"], "topics": ["travel_restaurant"],
                      "turns": [24, 44], "methods": ["zero-shot"], "per_topic": 3, "evaluate": False},
        "engine": {"type": "vllm", "model": "scale-llama", "scale_run": True, "dtype": "float32",
                   "enforce_eager": True, "max_model_len": 20480, "block_size": 128,
                   "engine_kwargs": {"num_gpu_blocks_override": budget // 128}, "counters_dir": str(counters)},
        "execution": {"mode": "actors", "concurrency": 1, "kv_budget_tokens": budget},
        "ray": {"num_cpus": 4},
        "output": {"dir": str(tmp_path / "runs"), "cache": False},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "mlartifacts")}})
    t0 = time.perf_counter()
    outcome = run_evaluation(cfg)
    recs = list(ResultStore(outcome.run_dir / "results").load().values())
    (f,) = counters.glob("*.json")  # one replica
    c = json.loads(f.read_text())["counters"]
    print(f"\n[vllm-cpu] scale model, 6 prompts of up to ~16k tokens, KV {budget:,} tokens: "
          f"{time.perf_counter() - t0:.1f}s; vLLM counters {c}")
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs)
    answers = {r["sample_id"]: r["outputs"]["answer"] for r in recs}
    longest = max(a["prompt_tokens"] for a in answers.values())
    assert 14_000 < longest < 20_480 - 300, longest
    assert c["vllm:num_preemptions"] == 0
    assert c["vllm:prompt_tokens"] == sum(a["prompt_tokens"] for a in answers.values())  # vLLM's count
    by_group: dict[str, list[dict]] = {}
    for r in recs:
        by_group.setdefault(r["prefix_key"], []).append(answers[r["sample_id"]])
    assert len(by_group) == 3
    for group in by_group.values():  # the shorter prompt of each pair follows the longer one (~10k tokens)
        follower = min(group, key=lambda a: a["prompt_tokens"])
        assert follower["prompt_tokens"] > 8_000, group
        assert follower["cached_prompt_tokens"] >= follower["prompt_tokens"] // 2, group
    assert c["vllm:prompt_tokens_cached"] == sum(a["cached_prompt_tokens"] for a in answers.values())


def test_serve_mode_routes_a_prefix_group_to_the_replica_that_holds_it(ray_here):
    """Two ray.serve.llm replicas of the scale model behind llmrec's PrefixAffinityRouter: four prefix
    groups of three requests (~1,500 shared tokens each) in one call. Each leader computes its prefix;
    each follower must reach the same replica and read the prefix from its cache (Serve's default
    router sends about half of them to the other replica, where they read nothing)."""
    from ray import serve

    from llmrec.serving.engine import build_engine
    from llmrec.serving.engines.vllm.serve import VLLMServeClient, deploy_llm_app
    from llmrec.types import Message, Request, SamplingParams

    cfg = build_engine({"type": "vllm", "model": "scale-llama", "scale_run": True, "dtype": "float32",
                        "enforce_eager": True, "max_model_len": 4096, "block_size": 128,
                        "engine_kwargs": {"num_gpu_blocks_override": 96}}).config
    t0 = time.perf_counter()
    served = deploy_llm_app(cfg, "llmrec-affinity-test", replicas=2, num_cpus=1, num_gpus=0)
    t_up = time.perf_counter() - t0
    try:
        client = VLLMServeClient(type(cfg).model_validate(served))
        words = "apple river stone cloud lamp forest engine violet harbor candle".split()
        requests = [Request(messages=[Message(role="user", content=f"Group {g}. " + " ".join(
                        words[(g * 7 + i * i) % len(words)] for i in range(1500)) + f" Question {q}?")],
                            sampling=SamplingParams(max_tokens=4, temperature=0), prefix_key=f"group-{g}")
                    for g in range(4) for q in range(3)]
        results = client.generate(requests)
    finally:
        serve.delete("llmrec-affinity-test")
    print(f"\n[vllm-cpu] 2 scale-model replicas with prefix affinity: up in {t_up:.1f}s, 12 requests in "
          f"{time.perf_counter() - t0 - t_up:.1f}s; cached tokens "
          f"{[(r.prompt_tokens, r.cached_prompt_tokens) for r in results]}")
    assert all(r.finish_reason != "error" for r in results), results
    for g in range(4):
        leader, *followers = results[3 * g: 3 * g + 3]
        assert leader.cached_prompt_tokens == 0, (g, results)
        assert all(f.cached_prompt_tokens >= f.prompt_tokens // 2 for f in followers), (g, results)

