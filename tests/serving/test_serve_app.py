"""The Serve app on a local Ray (num_cpus=2), answering real HTTP requests on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest


from llmrec.serving.engine import build_engine, engine_config
from llmrec.types import Constraint, Message, Request, SamplingParams

pytestmark = [pytest.mark.slow, pytest.mark.model]

FAKE = {"type": "fake", "model": "fake-m", "context_length": 40,
        "rules": [{"contains": "capital", "reply": "Paris is the capital"}], "default": "<choice>B</choice>"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app(local_ray):
    from llmrec.serving import serve_app

    from ray import serve

    for attempt in range(3):
        # a port free a moment ago can be taken by the time Serve's proxy binds it: Ray's own processes now
        # listen on 127.0.0.1 too (ports the system hands out), so another port is tried
        port = free_port()
        try:
            serve_app.deploy(FAKE, app_name="fake", num_cpus=0.5, port=port)
            break
        except Exception as e:  # noqa: BLE001 - only a bind failure is retried
            if "Failed to bind" not in str(e) or attempt == 2:
                raise
            serve.shutdown()
    yield serve_app, f"http://127.0.0.1:{port}"
    from ray import serve

    for name in list(serve.status().applications):
        serve_app.shutdown(name)


def chat(base: str, **body) -> httpx.Response:
    body.setdefault("messages", [{"role": "user", "content": "What is the capital of France?"}])
    return httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)


def test_models_and_health(app):
    _, base = app
    assert httpx.get(f"{base}/v1/models").json()["data"][0]["id"] == "fake-m"
    assert httpx.get(f"{base}/health").json()["status"] == "ok"


def test_chat_completion_is_openai_shaped(app):
    _, base = app
    r = chat(base, model="fake-m", temperature=0, max_tokens=3, stop="\n", seed=1)
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["object"] == "chat.completion" and data["model"] == "fake-m"
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "Paris is the"}
    assert data["choices"][0]["finish_reason"] == "length"
    u = data["usage"]
    assert u["completion_tokens"] == 3 and u["total_tokens"] == u["prompt_tokens"] + 3


def test_constraints_reach_the_engine(app):
    _, base = app
    r = chat(base, structured_outputs={"choice": ["X", "Y"]})
    assert r.json()["choices"][0]["message"]["content"] == "X"  # the fake engine falls back to the first choice
    r = chat(base, response_format={"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object"}}})
    assert r.json()["choices"][0]["message"]["content"] == "{}"


def test_bad_requests_get_openai_errors(app):
    _, base = app
    assert chat(base, model="other").status_code == 404
    bad = chat(base, messages=[{"role": "robot", "content": "x"}])
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert chat(base, stream=True).status_code == 400
    assert httpx.post(f"{base}/v1/chat/completions", content=b"{not json", timeout=30).status_code == 400
    long = chat(base, messages=[{"role": "user", "content": "word " * 60}])
    assert long.status_code == 400 and long.json()["error"]["code"] == "context_length_exceeded"


def test_concurrent_requests_fail_alone(app):
    _, base = app
    texts = ["capital?", "word " * 60, "hello", "capital again?", "x"]
    with ThreadPoolExecutor(len(texts)) as pool:
        replies = list(pool.map(lambda t: chat(base, messages=[{"role": "user", "content": t}]), texts))
    assert [r.status_code for r in replies] == [200, 400, 200, 200, 200]
    assert replies[0].json()["choices"][0]["message"]["content"] == "Paris is the capital"
    assert replies[2].json()["choices"][0]["message"]["content"] == "<choice>B</choice>"


def test_openai_engine_talks_to_the_app(app):
    _, base = app
    e = build_engine({"type": "openai", "base_url": f"{base}/v1", "model": "fake-m"})
    out = e.generate([Request(messages=[Message(role="user", content="the capital?")])])
    assert out[0].text == "Paris is the capital"
    assert e.count_tokens(Request(messages=[Message(role="user", content="a b c")])) == 5  # exact, via /tokenize
    out = e.generate([Request(messages=[Message(role="user", content="word " * 60)])])
    assert out[0].finish_reason == "over_context" and out[0].prompt_tokens == 62 and out[0].context_limit == 40


def test_serve_engine_matches_the_direct_engine(app):
    serve_app, _ = app
    remote = serve_app.ServeEngine("fake", engine_config(FAKE))
    direct = build_engine(FAKE)
    reqs = [Request(messages=[Message(role="user", content=t)], request_id=str(i))
            for i, t in enumerate(["capital?", "anything", "pick", "more"])]
    reqs.append(Request(messages=[Message(role="user", content="x")], constraint=Constraint(choices=["C", "D"])))
    got = [r.model_dump(exclude={"latency_s"}) for r in remote.generate(reqs)]
    want = [r.model_dump(exclude={"latency_s"}) for r in direct.generate(reqs)]
    assert got == want
    assert remote.identity() == direct.identity() and remote.config == direct.config
    assert remote.context_limit == direct.context_limit == 40  # the request cache checks a hit against it
    assert remote.count_tokens(reqs[0]) == direct.count_tokens(reqs[0])
    assert remote.check_health()
    out = remote.generate([Request(messages=[Message(role="user", content="word " * 60)]),
                           Request(messages=[Message(role="user", content="capital?")])])
    assert out[0].finish_reason == "over_context" and out[0].prompt_tokens == 62 and out[0].context_limit == 40
    assert out[1].text == "Paris is the capital"


LLAMA = {"type": "llamacpp", "n_ctx": 1024, "n_threads": 1}


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_llamacpp_behind_serve_over_http(app):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not importable")
    serve_app, base = app
    serve_app.deploy(LLAMA, app_name="llama", num_cpus=1, port=int(base.rsplit(":", 1)[1]), route_prefix="/llama")
    q = [{"role": "user", "content": "Which would you pick? A) steak B) salad. Answer with a letter."}]
    r = httpx.post(f"{base}/llama/v1/chat/completions", timeout=120,
                   json={"messages": q, "temperature": 0, "structured_outputs": {"choice": ["A", "B"]}})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] in {"A", "B"}
    assert r.json()["model"] == "gemma-3-270m-q4_k_m.gguf"
    req = Request(messages=[Message(**m) for m in q], sampling=SamplingParams(max_tokens=8))
    remote = serve_app.ServeEngine("llama", engine_config(LLAMA)).generate([req])[0]
    direct_engine = build_engine(LLAMA)
    direct = direct_engine.generate([req])[0]
    direct_engine.close()
    assert (remote.text, remote.prompt_tokens, remote.completion_tokens) == \
        (direct.text, direct.prompt_tokens, direct.completion_tokens)
    serve_app.shutdown("llama")
