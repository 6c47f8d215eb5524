"""The openai engine against a stdlib HTTP server on 127.0.0.1 (the boundary is faked, not the engine)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmrec.errors import ConfigError
from llmrec.serving.engine import build_engine
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
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload):
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "m"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.seen.append((self.path, dict(self.headers), body))
                if self.path == "/tokenize":
                    if not server.tokenize:
                        return self._send(404, {"detail": "Not Found"})
                    return self._send(200, {"count": 7 * len(body["messages"]), "max_model_len": 4096})
                if server.fail_next > 0:
                    server.fail_next -= 1
                    return self._send(500, {"error": {"message": "boom"}})
                if server.status_body is not None:
                    return self._send(*server.status_body)
                time.sleep(server.delay_s)
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
