"""The openai engine against a stdlib HTTP server on 127.0.0.1 (the boundary is faked, not the engine)."""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmrec.errors import ConfigError
from llmrec.serving.engine import build_engine
from llmrec.serving.engines.openai import retry_after_s
from llmrec.serving.resilience import generate_resilient
from llmrec.types import Constraint, Message, Request, SamplingParams


class FakeServer:
    """Answers /v1/chat/completions with the last user message reversed; scripted faults."""

    def __init__(self):
        self.seen: list[tuple[str, dict, dict]] = []  # (path, headers, body)
        self.fail_next = 0
        self.status_body: tuple[int, str] | None = None
        self.tokenize = True
        self.delay_s = 0.0
        self.unknown_fields: set[str] = set()  # request fields answered as unknown (400), as OpenAI does
        self.retry_after: list[str | None] = []  # one 429 per entry, with that Retry-After header (None: none)
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload, headers: dict | None = None):
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "m"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.seen.append((self.path, dict(self.headers), body))
                if self.path.split("?")[0] == "/tokenize":
                    if not server.tokenize:
                        return self._send(404, {"detail": "Not Found"})
                    return self._send(200, {"count": 7 * len(body["messages"]), "max_model_len": 4096})
                if server.fail_next > 0:
                    server.fail_next -= 1
                    return self._send(500, {"error": {"message": "boom"}})
                if server.status_body is not None:
                    return self._send(*server.status_body)
                # unknown_fields names a field, or a response_format type ("json_schema", "json_object")
                sent = [f for f in ("structured_outputs", "response_format") if f in body]
                rejected = [f for f in sent if f in server.unknown_fields
                            or (f == "response_format" and body[f]["type"] in server.unknown_fields)]
                if rejected:
                    return self._send(400, {"error": {"message": f"Unrecognized request argument supplied: "
                                                                 f"{rejected[0]}", "type": "invalid_request_error"}})
                with server._lock:
                    if server.retry_after:
                        value = server.retry_after.pop(0)
                        server.max_in_flight = 0  # from now on: how many at once after the last 429
                        return self._send(429, {"error": {"message": "Rate limit reached"}},
                                          {"Retry-After": value} if value is not None else {})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                time.sleep(server.delay_s)
                with server._lock:
                    server.in_flight -= 1
                last = body["messages"][-1]["content"]
                self._send(200, {
                    "id": "x", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": last[::-1]},
                                 "finish_reason": "length" if body["max_tokens"] < 3 else "stop"}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14,
                              "prompt_tokens_details": {"cached_tokens": 8}}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def engine(server, **kw):
    e = build_engine({"type": "openai", "base_url": server.url, "model": "m", **kw})
    e.start()
    return e


def req(text: str, **kw) -> Request:
    return Request(messages=[Message(role="system", content="sys"), Message(role="user", content=text)], **kw)


def test_reply_usage_and_order(server):
    e = engine(server, max_concurrency=3)
    server.delay_s = 0.05
    out = e.generate([req(f"q{i}", request_id=str(i)) for i in range(6)])
    assert [r.text for r in out] == [f"{i}q" for i in range(6)]
    assert [r.request_id for r in out] == [str(i) for i in range(6)]
    r = out[0]
    assert (r.prompt_tokens, r.completion_tokens, r.cached_prompt_tokens, r.finish_reason) == (11, 3, 8, "stop")
    short = e.generate([req("abc", sampling=SamplingParams(max_tokens=2, stop=["\n"], seed=5, temperature=0.7))])
    assert short[0].finish_reason == "length"
    body = server.seen[-1][2]
    assert body["stop"] == ["\n"] and body["seed"] == 5 and body["temperature"] == 0.7 and body["model"] == "m"
    assert body["messages"][0] == {"role": "system", "content": "sys"}


def test_api_key_header_from_named_env_var(server, monkeypatch):
    monkeypatch.setenv("LLMREC_TEST_KEY", "sk-123")
    engine(server, api_key_env="LLMREC_TEST_KEY").generate([req("x")])
    assert server.seen[-1][1]["Authorization"] == "Bearer sk-123"
    engine(server).generate([req("x")])
    assert "Authorization" not in server.seen[-1][1]
    monkeypatch.delenv("LLMREC_TEST_KEY")
    with pytest.raises(ConfigError, match="LLMREC_TEST_KEY"):
        engine(server, api_key_env="LLMREC_TEST_KEY")
    assert "sk-123" not in json.dumps(engine(server).identity())


def test_constraint_styles(server):
    choice = Constraint(choices=["A", "B"])
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    engine(server).generate([req("x", constraint=choice)])
    assert server.seen[-1][2]["structured_outputs"] == {"choice": ["A", "B"]}
    engine(server).generate([req("x", constraint=Constraint(json_schema=schema))])
    assert server.seen[-1][2]["structured_outputs"] == {"json": schema}
    engine(server, constraint_style="none").generate([req("x", constraint=choice)])
    assert "structured_outputs" not in server.seen[-1][2] and "response_format" not in server.seen[-1][2]
    e = engine(server, constraint_style="openai")
    e.generate([req("x", constraint=Constraint(json_schema=schema))])
    assert server.seen[-1][2]["response_format"]["json_schema"]["schema"] == schema
    # Choices travel as {"answer": enum} and come back unwrapped.
    out = e.generate([req('}"B":"rewsna"{', constraint=choice)])
    assert server.seen[-1][2]["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["A", "B"]
    assert out[0].text == "B"


def test_http_500_is_engine_error_and_retries_recover(server):
    e = engine(server)
    server.fail_next = 1
    out = e.generate([req("x")])
    assert out[0].finish_reason == "error" and "HTTP 500" in out[0].error
    server.fail_next = 2
    out = generate_resilient(e, [req("abc")], retries=3, backoff_s=0.01)
    assert out[0].ok and out[0].text == "cba"
    server.fail_next = 10
    out = generate_resilient(e, [req("abc")], retries=1, backoff_s=0.01)
    assert out[0].finish_reason == "error" and "HTTP 500" in out[0].error


def test_context_error_is_context_overflow(server):
    server.status_body = (400, json.dumps({"error": {"message": "This model's maximum context length is 2048 tokens. "
                                                     "However, you requested 2100 tokens (2000 in the messages, "
                                                     "100 in the completion)."}}))
    out = engine(server).generate([req("x")])
    assert out[0].finish_reason == "over_context" and out[0].prompt_tokens == 2000 and "2048" in out[0].error
    assert out[0].context_limit == 2048
    server.status_body = (400, json.dumps({"error": {"message": "temperature must be >= 0"}}))
    out = engine(server).generate([req("x")])
    assert out[0].finish_reason == "error" and "temperature" in out[0].error


def test_a_failed_request_keeps_the_batch_answers_and_only_it_is_resent(server):
    """Failures are per request: the other answers of the batch are kept, and the retry
    sends only the failed request again (not the whole batch, not one by one)."""
    e = engine(server, max_concurrency=1)
    server.fail_next = 1  # the first request of the batch gets a 500
    n_before = len(server.seen)
    out = generate_resilient(e, [req("abc"), req("def"), req("ghi")], retries=2, backoff_s=0.01)
    assert [r.text for r in out] == ["cba", "fed", "ihg"] and all(r.ok for r in out)
    sent = [s[2]["messages"][-1]["content"] for s in server.seen[n_before:] if s[0].endswith("/chat/completions")]
    assert sent == ["abc", "def", "ghi", "abc"]


def test_unreachable_server_is_engine_error():
    e = build_engine({"type": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "timeout_s": 2})
    out = e.generate([req("x")])
    assert out[0].finish_reason == "error" and "127.0.0.1:9" in out[0].error
    assert e.check_health() is False


def test_count_tokens_uses_tokenize_else_estimates(server):
    e = engine(server)
    assert e.count_tokens(req("hello")) == 14
    assert server.seen[-1][0] == "/tokenize" and server.seen[-1][2]["add_generation_prompt"] is True
    server.tokenize = False
    e2 = engine(server)
    n = e2.count_tokens(req("x" * 400))
    assert n == 1 + 100 + 8
    asked = sum(path == "/tokenize" for path, _, _ in server.seen)
    assert e2.count_tokens(req("y")) > 0
    assert sum(path == "/tokenize" for path, _, _ in server.seen) == asked  # a missing /tokenize is asked once


def sent_formats(server) -> list[str]:
    """Which constraint field each chat request carried."""
    out = []
    for path, _, body in server.seen:
        if path.endswith("/chat/completions"):
            rf = body.get("response_format")
            out.append("structured_outputs" if "structured_outputs" in body else rf["type"] if rf else "none")
    return out


def test_rejected_constraint_format_falls_back_once_and_says_so(server, caplog):
    """An OpenAI-style server rejects vLLM's structured_outputs: the default (auto) moves to response_format
    once, keeps it for the rest of the run, logs it and shows it in its identity."""
    server.unknown_fields = {"structured_outputs"}
    choice = Constraint(choices=["A", "B"])
    e = engine(server, max_concurrency=1)
    assert e.identity() == {"type": "openai", "model": "m", "constraint_style": "auto", "context_length": None,
                            "base_url": e.config.base_url.rstrip("/")} and e.run_facts() == {}
    with caplog.at_level(logging.WARNING, logger="llmrec.serving.engines.openai"):
        out = e.generate([req('}"B":"rewsna"{', constraint=choice) for _ in range(3)])
    assert [r.text for r in out] == ["B", "B", "B"] and all(r.ok for r in out)
    assert sent_formats(server) == ["structured_outputs", "json_schema", "json_schema", "json_schema"]
    assert e.run_facts() == {"constraint_sent": "openai"}
    assert "constraint_sent" not in e.identity()  # the request cache key stays what the config says
    warned = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(warned) == 1 and "structured_outputs" in warned[0] and "as openai" in warned[0]
    # a server with JSON mode only: on to json_object; unconstrained requests are not affected
    server.unknown_fields, server.seen = {"structured_outputs", "json_schema"}, []
    e = engine(server, max_concurrency=4)
    out = e.generate([req(f"q{i}", constraint=Constraint(json_schema={"type": "object"})) for i in range(4)])
    assert all(r.ok for r in out) and sent_formats(server)[-1] == "json_object"
    assert e.run_facts() == {"constraint_sent": "json_object"}


def test_a_runs_constraint_fallback_is_recorded_with_the_run(server, tmp_path, local_ray, caplog):
    """End to end through the runner: the server rejects vLLM's structured_outputs; the fallback the
    engine made in its Ray actor is logged by the driver and recorded in the run directory
    (run_facts.json) and in the MLflow protocol tag, also after a resume that sends nothing."""
    import mlflow

    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.run_config import RunConfig
    from tests.pipelines.toy.benchmark import NAME

    server.unknown_fields = {"structured_outputs"}
    cfg = RunConfig.model_validate({
        "benchmark": {"name": NAME, "n": 4, "rounds": 0, "choices": ["yes", "no"]},
        "engine": {"type": "openai", "base_url": server.url, "model": "m"},
        "execution": {"batch_size": 2, "retries": 0},
        "output": {"dir": str(tmp_path / "runs"), "run_name": "r", "cache": False},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")}})
    with caplog.at_level(logging.WARNING, logger="llmrec.pipelines.runner.execution"):
        out = run_evaluation(cfg)
    assert out.metrics["failed"] == 0 and out.metrics["n_samples"] == 4
    assert "json_schema" in sent_formats(server)
    facts = {"subject": {"constraint_sent": "openai"}}
    assert json.loads((tmp_path / "runs" / "r" / "run_facts.json").read_text()) == facts
    assert [r for r in caplog.records if "subject: constraint_sent=openai" in r.getMessage()]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    assert json.loads(client.get_run(out.mlflow_run_id).data.tags["protocol"])["run_facts"] == facts
    again = run_evaluation(cfg)  # every sample stored: nothing is sent, the facts stay with the results
    assert again.stats["samples_resumed"] == 4
    assert json.loads(client.get_run(again.mlflow_run_id).data.tags["protocol"])["run_facts"] == facts
    server.unknown_fields = set()  # a server that takes structured_outputs: a fresh run reports no fallback
    fresh = run_evaluation(cfg.model_copy(update={"output": cfg.output.model_copy(update={"resume": False})}))
    assert not (tmp_path / "runs" / "r" / "run_facts.json").exists()
    assert "run_facts" not in json.loads(client.get_run(fresh.mlflow_run_id).data.tags["protocol"])


def test_a_fixed_constraint_style_is_not_changed(server):
    server.unknown_fields = {"structured_outputs"}
    out = engine(server, constraint_style="vllm").generate([req("x", constraint=Constraint(choices=["A"]))])
    assert out[0].finish_reason == "error" and "structured_outputs" in out[0].error
    assert sent_formats(server) == ["structured_outputs"]


def test_429_waits_for_retry_after_and_lowers_concurrency(server):
    """A rate-limited server: the 429'd request fails with the server's Retry-After, which the retry waits out
    (not a fast retry), and fewer requests are sent at once afterwards (4 before the 429; halved to 2, grown by
    at most 1 per success since)."""
    e = engine(server, max_concurrency=4)
    server.delay_s = 0.2
    server.retry_after = ["1"]
    t0 = time.monotonic()
    out = generate_resilient(e, [req(f"q{i}") for i in range(8)], retries=1, backoff_s=0.01)
    assert time.monotonic() - t0 >= 1.0  # the wait was honoured, not a fast retry
    assert all(r.ok for r in out) and [r.text for r in out] == [f"{i}q" for i in range(8)]
    assert 1 <= server.max_in_flight <= 3
    # Retry-After as an HTTP date
    server.delay_s, server.retry_after = 0.0, [email.utils.formatdate(time.time() + 2, usegmt=True)]
    t0 = time.monotonic()
    out = generate_resilient(e, [req("abc")], retries=1, backoff_s=0.01)
    assert out[0].ok and time.monotonic() - t0 >= 0.9


def test_429_is_one_attempt_with_the_server_s_wait_cut_to_rate_limit_wait_s(server):
    server.retry_after = [None]
    out = engine(server).generate([req("abc")])  # no retry inside the engine: the caller's policy retries
    assert out[0].finish_reason == "error" and "HTTP 429" in out[0].error and out[0].retry_after_s is None
    server.retry_after = ["30"]
    out = engine(server, rate_limit_wait_s=0.2).generate([req("abc")])
    assert out[0].finish_reason == "error" and out[0].retry_after_s == 0.2
    assert "retry_after_s" not in out[0].model_dump()  # a hint to the retry policy, never stored


def test_retry_after_header_values():
    assert retry_after_s("7") == 7.0 and retry_after_s("-3") == 0.0
    assert 58 <= retry_after_s(email.utils.formatdate(time.time() + 60, usegmt=True)) <= 60
    assert retry_after_s(None) is None and retry_after_s("soon") is None


@pytest.mark.parametrize("usage", [{"prompt_tokens": "x"}, {"completion_tokens": -2}, {"prompt_tokens": 1.5},
                                   {"prompt_tokens_details": {"cached_tokens": "many"}}, {"prompt_tokens": True}])
def test_malformed_usage_fails_the_sample_saying_so(server, usage):
    """A server whose token counts are not counts: the request fails with "the server's reply is malformed", naming
    the field (not Python's `invalid literal for int()`), and the engine stays usable."""
    server.status_body = (200, json.dumps({"choices": [{"index": 0, "message": {"content": "A"}}], "usage": usage}))
    (r,) = engine(server).generate([req("x")])
    assert r.finish_reason == "error" and "the server's reply is malformed" in r.error, r.error
    assert "invalid literal" not in r.error and f"usage.{next(iter(usage))}" in r.error
    server.status_body = None
    assert engine(server).generate([req("ab")])[0].text == "ba"


def test_a_base_url_with_a_query_joins_the_path_before_it(server):
    """``…/v1?api-version=2&auth=K`` + ``/chat/completions``: the path goes before the query (not
    ``/v1?api-version=2&auth=K/chat/completions``), the query goes with every request, and the engine's messages
    show the URL joined so, its credential redacted."""
    e = engine(server, base_url=server.url + "?api-version=2&auth=K123")
    assert e.generate([req("ab")])[0].text == "ba"
    assert server.seen[-1][0] == "/v1/chat/completions?api-version=2&auth=K123"
    e.count_tokens(req("ab"))
    assert server.seen[-1][0] == "/tokenize?api-version=2&auth=K123"
    server.status_body = (500, "{}")
    (r,) = e.generate([req("x")])
    assert "/v1/chat/completions?api-version=2&auth=REDACTED: HTTP 500" in r.error and "K123" not in r.error


def test_a_null_message_content_is_a_failed_call_with_its_reason(server):
    """``message.content: null`` (a refusal, a filtered reply) is no answer: the call fails saying so, rather
    than an ok call with empty text that scoring counts as a missed answer."""
    server.status_body = (200, json.dumps({"choices": [{"index": 0, "finish_reason": "content_filter",
                                                        "message": {"role": "assistant", "content": None}}]}))
    (r,) = engine(server).generate([req("x")])
    assert r.finish_reason == "error" and not r.ok
    assert "message.content is null" in r.error and "content_filter" in r.error, r.error
    server.status_body = (200, json.dumps({"choices": [{"index": 0, "message": {"content": None,
                                                                                "refusal": "I can't help"}}]}))
    (r,) = engine(server).generate([req("x")])
    assert "I can't help" in r.error
