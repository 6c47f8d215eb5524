"""An HTTP server on 127.0.0.1 that answers every chat request with 429 and counts the attempts per request."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RateLimitedServer:
    """Every ``POST /v1/chat/completions`` gets HTTP 429 (``Retry-After: retry_after`` when set); ``attempts``
    counts them by the request's last message (make it unique per request)."""

    def __init__(self, retry_after: str | None = None):
        self.attempts: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.attempts[body["messages"][-1]["content"]] += 1
                data = json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit"}}).encode()
                self.send_response(429)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
