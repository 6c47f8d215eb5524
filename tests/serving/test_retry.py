"""The one retry policy (``serving/retry.py``): the attempt budget holds across the layers.

A real HTTP server on 127.0.0.1 that always answers 429 counts the attempts per request made through the
real openai engine under the resilience layer, and under the runner's worker (every stage of a benchmark):
never more than ``retries + 1``, each retry waiting at least the server's Retry-After."""

from __future__ import annotations

import time

import pytest

from llmrec.serving.engine import build_engine
from llmrec.serving.resilience import generate_resilient
from llmrec.serving.retry import RetryPolicy
from llmrec.types import Message, Request
from tests.serving.limited_server import RateLimitedServer


def req(text: str) -> Request:
    return Request(messages=[Message(role="user", content=text)])


@pytest.fixture
def limited():
    s = RateLimitedServer(retry_after="0.2")
    yield s
    s.close()


def openai(server, **kw):
    e = build_engine({"type": "openai", "base_url": server.url, "model": "m", "max_concurrency": 4, **kw})
    e.start()
    return e


def test_policy_budget_and_delays():
    p = RetryPolicy(retries=3, backoff_s=0.5)
    assert p.attempts == 4
    assert [p.delay(r) for r in (1, 2, 3)] == [0.5, 1.0, 2.0]  # doubling from backoff_s
    assert p.delay(1, retry_after_s=3.0) == 3.0 and p.delay(3, retry_after_s=0.1) == 2.0  # the longer one
    with pytest.raises(ValueError, match="outside the budget of 3 retries"):
        p.delay(4)
    with pytest.raises(ValueError, match="retries and backoff_s must be >= 0"):
        RetryPolicy(retries=-1)
    assert RetryPolicy(retries=0).attempts == 1


@pytest.mark.parametrize("retries", [0, 2])
def test_a_rate_limited_server_sees_at_most_retries_plus_one_attempts(limited, retries):
    e = openai(limited)
    t0 = time.monotonic()
    out = generate_resilient(e, [req(f"q{i}") for i in range(5)], retries=retries, backoff_s=0.01)
    took = time.monotonic() - t0
    assert all(r.finish_reason == "error" and "HTTP 429" in r.error for r in out)
    assert limited.attempts == {f"q{i}": retries + 1 for i in range(5)}
    assert took >= 0.2 * retries  # each retry waited the server's Retry-After, not the 0.01 s backoff
    e.close()


def test_the_budget_holds_through_the_runner_s_worker(limited):
    """Every stage of a benchmark, as a Ray Data actor runs them (``process_samples``): each request is
    still sent ``retries + 1`` times, and its sample is recorded as failed with the 429."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.worker import process_samples

    bench = get_benchmark("tests.pipelines.toy.benchmark:BENCHMARK")
    cfg = bench.config_cls(name=bench.name, n=3)
    e = openai(limited)
    rows = process_samples(bench, cfg, bench.build_samples(cfg, None), lambda role: e, retries=1, backoff_s=0.01)
    assert limited.attempts == {f"question {i}": 2 for i in range(3)}
    assert all(r["status"] == "failed" and "HTTP 429" in r["error"] for r in rows)
    e.close()
