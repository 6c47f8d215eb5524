"""The engine pool (``serving/engine_pool.py``): one Result per request, in order, across actors;
prefix groups kept on one actor; token accounting as the engine returned it; a killed actor or a
dead engine restarted by Ray and the call still answered; CPUs reserved and freed again."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from llmrec.errors import EngineError
from llmrec.serving.engine import build_engine, engine_config
from llmrec.serving.engine_pool import assign, runs_in_process, start_engine_pool, stop_engine_pool
from llmrec.serving.resilience import generate_resilient
from llmrec.types import Message, Request

FAKE = {"type": "fake", "default": "ok", "report_pid": True,
        "rules": [{"contains": f"q{i}", "reply": f"a{i}"} for i in range(8)]}


def req(i: int, prefix: str | None = None) -> Request:
    return Request(messages=[Message(role="user", content=f"question q{i}")], prefix_key=prefix, request_id=f"r{i}")


def pid_of(text: str) -> int:
    return int(text.rsplit("pid=", 1)[1])


def test_assign_keeps_prefix_groups_whole_and_balances_the_load():
    reqs = [req(0, "a"), req(1, "b"), req(2, "a"), req(3), req(4), req(5, "a")]
    parts = assign(reqs, [0, 0])
    assert sorted(i for p in parts for i in p) == list(range(6))
    owner = next(p for p in parts if 0 in p)
    assert {0, 2, 5} <= set(owner) and sorted(map(len, parts)) == [3, 3]
    assert all(p == sorted(p) for p in parts)
    assert assign([req(0)], [5, 0]) == [[], [0]]  # the least-loaded actor (in-flight requests) gets it
    assert assign([req(0)], [0, 0], start=1) == [[], [0]]  # ties rotate, so callers do not all pick actor 0


def test_remote_api_engines_are_not_pooled():
    assert runs_in_process(engine_config({"type": "fake"})) and runs_in_process(engine_config({"type": "llamacpp"}))
    assert not runs_in_process(engine_config({"type": "openai", "model": "m"}))


def _wait_cpu(ray, expected: float, timeout_s: float = 30) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = ray.available_resources().get("CPU", 0.0)
        if abs(got - expected) < 1e-6:
            return got
        time.sleep(0.2)
    return ray.available_resources().get("CPU", 0.0)


@pytest.mark.slow
@pytest.mark.model
def test_pool_answers_each_request_in_order_across_two_actors(local_ray):
    import ray

    pool = start_engine_pool(FAKE, 2, "t-order", num_cpus=0.5)
    try:
        client = pickle.loads(pickle.dumps(pool.client()))  # it travels to every Ray Data actor like this
        reqs = [req(i) for i in range(8)]
        out = client.generate(reqs)
        local = build_engine(FAKE).generate(reqs)
        assert [r.request_id for r in out] == [r.request_id for r in reqs]
        assert [r.text.split()[0] for r in out] == [f"a{i}" for i in range(8)]
        assert [(r.prompt_tokens, r.completion_tokens, r.finish_reason) for r in out] == \
               [(r.prompt_tokens, r.completion_tokens, r.finish_reason) for r in local]
        actor_pids = set(ray.get([a.pid.remote() for a in pool.actors]))
        assert {pid_of(r.text) for r in out} == actor_pids and len(actor_pids) == 2
        grouped = client.generate([req(i, "shared prefix") for i in range(4)])
        assert len({pid_of(r.text) for r in grouped}) == 1  # one prefix group, one actor's prefix cache
        assert client.count_tokens(reqs[0]) == build_engine(FAKE).count_tokens(reqs[0])
        assert client.identity() == build_engine(FAKE).identity()  # the request cache key is the engine's
        assert getattr(client, "context_limit", None) is None and client.check_health()
    finally:
        stop_engine_pool(pool)


@pytest.mark.slow
@pytest.mark.model
def test_killed_actor_mid_call_is_restarted_and_the_call_answered(local_ray):
    import ray

    pool = start_engine_pool({**FAKE, "delay_s": 0.4}, 1, "t-kill", num_cpus=0.5, max_restarts=2)
    try:
        client = pool.client()
        before = ray.get(pool.actors[0].pid.remote())
        got: dict = {}
        call = threading.Thread(target=lambda: got.update(out=client.generate([req(i) for i in range(5)])))
        call.start()
        time.sleep(0.8)  # mid-call: two of five requests done
        ray.kill(pool.actors[0], no_restart=False)
        call.join(120)
        out = got["out"]
        assert [r.text.split()[0] for r in out] == [f"a{i}" for i in range(5)] and all(r.ok for r in out)
        after = ray.get(pool.actors[0].pid.remote())
        assert after != before and {pid_of(r.text) for r in out} == {after}
    finally:
        stop_engine_pool(pool)


@pytest.mark.slow
@pytest.mark.model
def test_dead_engine_ends_its_actor_which_ray_restarts(local_ray, tmp_path):
    import ray

    cfg = {"type": "tests.serving.dying_engine:DYING", "marker": str(tmp_path / "died"), "default": "ok",
           "report_pid": True}
    pool = start_engine_pool(cfg, 1, "t-dead", num_cpus=0.5, max_restarts=1)
    try:
        before = ray.get(pool.actors[0].pid.remote())
        out = pool.client().generate([req(0), req(1)])
        assert (tmp_path / "died").exists()  # the engine did die once (EngineDead)
        assert all(r.ok and r.text.startswith("ok") for r in out)
        assert {pid_of(r.text) for r in out} == {ray.get(pool.actors[0].pid.remote())} != {before}
    finally:
        stop_engine_pool(pool)


@pytest.mark.slow
@pytest.mark.model
def test_pool_reserves_its_cpus_reraises_engine_errors_and_frees_everything(local_ray):
    import ray

    free = _wait_cpu(ray, ray.cluster_resources()["CPU"])  # actors of earlier tests are gone
    pool = start_engine_pool({"type": "fake", "fail_first": 1}, 2, "t-res", num_cpus=0.5)
    try:
        assert _wait_cpu(ray, free - 1.0) == pytest.approx(free - 1.0)
        with pytest.raises(EngineError, match="fake failure 1/1"):  # as if the engine were local
            pool.client().generate([req(0)])
    finally:
        stop_engine_pool(pool)
    assert _wait_cpu(ray, free) == pytest.approx(free)


def _wait_dead(ray, actor, timeout_s: float = 30.0) -> None:
    import time

    from ray.exceptions import RayActorError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.pid.remote(), timeout=5)
        except RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("the killed actor kept answering")


@pytest.mark.slow
@pytest.mark.model
def test_a_permanently_dead_actor_s_share_goes_to_the_others(local_ray):
    import ray

    pool = start_engine_pool(FAKE, 2, "t-gone", num_cpus=0.5, max_restarts=0)
    try:
        survivor = ray.get(pool.actors[1].pid.remote())
        ray.kill(pool.actors[0], no_restart=True)  # like a lost node once restarts are used up
        _wait_dead(ray, pool.actors[0])  # ray.kill returns before the actor is gone
        client = pool.client()
        first = client.generate([req(i) for i in range(4)])  # the dead actor's share fails, the rest is answered
        failed = [r for r in first if not r.ok]
        assert failed and all("ActorDiedError" in r.error for r in failed) and len(failed) < 4
        out = generate_resilient(client, [req(i) for i in range(4)], retries=1, backoff_s=0.01)
        assert [r.text.split()[0] for r in out] == [f"a{i}" for i in range(4)]
        assert {pid_of(r.text) for r in out} == {survivor}  # the retry went to the live actor only
    finally:
        stop_engine_pool(pool)


@pytest.mark.slow
@pytest.mark.model
def test_an_engine_that_cannot_start_fails_the_pool_start_naming_why(local_ray, tmp_path):
    import ray

    total = ray.cluster_resources()["CPU"]
    cfg = {"type": "tests.serving.dying_engine:BROKEN", "marker": str(tmp_path / "model.gguf")}
    with pytest.raises(EngineError, match=r"could not start.*model file .*model.gguf not found"):
        start_engine_pool(cfg, 2, "t-broken", num_cpus=0.5, max_restarts=1)
    assert _wait_cpu(ray, total) == pytest.approx(total)  # nothing left behind


@pytest.mark.slow
@pytest.mark.model
def test_the_pool_adds_no_attempts_to_a_rate_limited_server(local_ray):
    """An engine in pool actors behind the resilience layer: a server that always answers 429 sees each
    request ``retries + 1`` times (the pool re-sends nothing of its own)."""
    from tests.serving.limited_server import RateLimitedServer

    server = RateLimitedServer(retry_after="0")
    pool = start_engine_pool({"type": "openai", "base_url": server.url, "model": "m"}, 2, "t-429", num_cpus=0.5)
    try:
        reqs = [Request(messages=[Message(role="user", content=f"q{i}")]) for i in range(4)]
        out = generate_resilient(pool.client(), reqs, retries=2, backoff_s=0.01)
        assert all(r.finish_reason == "error" and "HTTP 429" in r.error for r in out)
        assert server.attempts == {f"q{i}": 3 for i in range(4)}
    finally:
        stop_engine_pool(pool)
        server.close()
