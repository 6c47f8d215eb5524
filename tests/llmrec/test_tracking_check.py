"""The check before a run tells a busy tracking server from a broken one: a server that took the connection
but answers slowly is waited for (longer tries, a warning); one that never answers fails naming how long it
was given."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmrec.errors import ConfigError
from llmrec.tracking import check_store


def serve(delays: list[float]):
    """An MLflow-shaped server on the loopback whose n-th answer comes after ``delays[n]`` seconds (the last
    delay repeats)."""
    calls: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(time.monotonic())
            time.sleep(delays[min(len(calls) - 1, len(delays) - 1)])
            body = b'{"experiments": []}'
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up on this try

        do_GET = do_POST

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", calls


def test_a_busy_server_is_waited_for_with_a_warning(caplog):
    server, uri, calls = serve([1.6, 0.0])  # the first answer misses a 1 s try; the longer second try gets one
    try:
        with caplog.at_level("WARNING", logger="llmrec.tracking"):
            assert check_store(uri, timeout_s=1, slow_tries=3) == uri
    finally:
        server.shutdown()
    assert len(calls) == 2
    assert any("did not answer within 1 s" in r.getMessage() for r in caplog.records)


def test_a_server_that_never_answers_fails_naming_how_long_it_was_given():
    server, uri, calls = serve([30.0])
    t0 = time.monotonic()
    try:
        with pytest.raises(ConfigError) as err:
            check_store(uri, timeout_s=1, slow_tries=2)
    finally:
        server.shutdown()
    text = str(err.value)
    assert "cannot be used" in text and "did not answer in 3 s (2 tries)" in text, text
    assert len(calls) == 2 and time.monotonic() - t0 < 15
