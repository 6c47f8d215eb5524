"""`llmrec.cluster.serve_builder:build_app`, the import path of the RayService, serves real HTTP."""

from __future__ import annotations

import httpx
import pytest

from tests.cluster.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_built_app_answers_openai_requests(local_ray):
    from ray import serve

    from llmrec.cluster.serve_builder import build_app

    port = free_port()
    serve.shutdown()  # a Serve left by an earlier module keeps its own port; this test wants its own
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    # as `serve run llmrec.cluster.serve_builder:build_app engine=... replicas=1 num_cpus=0.5` passes them
    app = build_app({"engine": '{type: fake, model: built-m, default: "<choice>C</choice>"}', "num_cpus": "0.5"})
    serve.run(app, name="jobs-builder-test", route_prefix="/builder")
    try:
        base = f"http://127.0.0.1:{port}/builder"
        assert httpx.get(f"{base}/v1/models", timeout=60).json()["data"][0]["id"] == "built-m"
        reply = httpx.post(f"{base}/v1/chat/completions", timeout=60,
                           json={"messages": [{"role": "user", "content": "pick one"}]}).json()
        assert reply["choices"][0]["message"]["content"] == "<choice>C</choice>"
    finally:
        serve.delete("jobs-builder-test")
        serve.shutdown()
