"""Request-cache keys and the cached engine."""

from llmrec.serving.cache import CachedEngine, RequestCache, cache_key, cacheable
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig
from llmrec.types import Constraint, Message, Request, SamplingParams


def req(text="hi", **kw):
    return Request(messages=[Message(role="user", content=text)], **kw)


def test_cache_key_covers_engine_messages_sampling_constraint():
    ident = {"type": "fake", "model": "m"}
    base = cache_key(ident, req())
    assert base == cache_key(ident, req())
    assert base == cache_key(ident, req(request_id="x", prefix_key="p"))  # routing hints do not matter
    assert base != cache_key({"type": "fake", "model": "m2"}, req())
    assert base != cache_key(ident, req("hello"))
    assert base != cache_key(ident, req(sampling=SamplingParams(max_tokens=5)))
    assert base != cache_key(ident, req(constraint=Constraint(choices=["a", "b"])))
    assert not cacheable(req(sampling=SamplingParams(temperature=0.7, seed=None)))
    assert cacheable(req(sampling=SamplingParams(temperature=0.7, seed=3)))


def test_cached_engine_hits_and_dedupes(tmp_path):
    eng = FakeEngine(FakeEngineConfig(default="ok"))
    cached = CachedEngine(eng, RequestCache(tmp_path / "c.sqlite"))
    out = cached.generate([req("a"), req("a"), req("b")])
    assert [r.text for r in out] == ["ok"] * 3
    assert eng.calls == 2 and cached.misses == 2 and cached.hits == 1
    again = CachedEngine(FakeEngine(FakeEngineConfig(default="ok")), RequestCache(tmp_path / "c.sqlite"))
    res = again.generate([req("a"), req("b")])
    assert again.engine.calls == 0 and all(r.from_cache for r in res)
