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


def test_entries_record_the_run_that_computed_them(tmp_path):
    """A hit computed for another run says which (``computed_for``); this run's own entries, and duplicates within
    one batch, say nothing; the writer is not part of the stored answer."""
    path = tmp_path / "c.sqlite"
    first = CachedEngine(FakeEngine(FakeEngineConfig(default="ok")), RequestCache(path), "runs/a")
    out = first.generate([req("a"), req("a")])
    assert [r.computed_for for r in out] == [None, None] and out[1].from_cache
    mine = CachedEngine(FakeEngine(FakeEngineConfig(default="ok")), RequestCache(path), "runs/a")
    assert [r.computed_for for r in mine.generate([req("a")])] == [None]  # a resumed run's own call
    other = CachedEngine(FakeEngine(FakeEngineConfig(default="ok")), RequestCache(path), "runs/b")
    res = other.generate([req("a"), req("b")])
    assert [(r.from_cache, r.computed_for) for r in res] == [(True, "runs/a"), (False, None)]
    cache = RequestCache(path)
    assert sorted(r for (r,) in cache._conn.execute("SELECT run FROM responses")) == ["runs/a", "runs/b"]
    assert "computed_for" not in cache._conn.execute("SELECT result FROM responses").fetchone()[0]


def test_a_cache_file_without_the_run_column_is_migrated(tmp_path):
    """A file written before the cache recorded its runs: opened, its entries still answer, marked as computed for an
    unrecorded run (so never counted as the asking run's own work); new entries record their run."""
    import sqlite3

    from llmrec.serving.cache import UNRECORDED
    from llmrec.types import Result

    path = tmp_path / "old.sqlite"
    eng = FakeEngine(FakeEngineConfig(default="ok"))
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
    old.execute("INSERT INTO responses VALUES (?, ?)", (cache_key(eng.identity(), req("a")),
                                                        Result(text="old", prompt_tokens=3).model_dump_json()))
    old.commit()
    old.close()
    cached = CachedEngine(eng, RequestCache(path), "runs/new")
    hit, fresh = cached.generate([req("a"), req("b")])
    assert (hit.text, hit.from_cache, hit.computed_for) == ("old", True, UNRECORDED)
    assert (fresh.text, fresh.computed_for) == ("ok", None) and eng.calls == 1
    again = RequestCache(path)  # opening a migrated file again changes nothing
    assert sorted(r or "-" for (r,) in again._conn.execute("SELECT run FROM responses")) == ["-", "runs/new"]


def test_unstored_work_is_handed_to_the_same_runs_next_invocation_once(tmp_path):
    """An answer computed for a run whose batch was never stored stays that run's unsettled work; the run's next
    invocation gets it as its own engine call (tokens and latency of the call that made it, not a cache hit), once;
    another run, or the same invocation, gets a plain cache hit; settled work is no longer the run's."""
    from llmrec.serving.cache import Work

    path, cfg = tmp_path / "c.sqlite", FakeEngineConfig(default="ok", delay_s=0.01)
    first = CachedEngine(FakeEngine(cfg), RequestCache(path),
                         Work("runs/r", "inv1", "subject"))
    made = first.generate([req("a"), req("b")])
    assert not any(r.from_cache for r in made) and sorted(first.take_worked()) == sorted(
        cache_key(first.identity(), req(t)) for t in "ab") and first.take_worked() == []
    assert [r.prompt_tokens for _, r in RequestCache(path).unsettled("runs/r")] == [3, 3]  # "a", "b": 1 + 2 each
    # the same invocation (another batch of it): a cache hit, the work stays where it is
    assert all(r.from_cache for r in CachedEngine(FakeEngine(cfg), RequestCache(path),
                                                  Work("runs/r", "inv1", "subject")).generate([req("a")]))
    # another run: a cache hit
    other = CachedEngine(FakeEngine(cfg), RequestCache(path), Work("runs/other", "x", "subject"))
    assert all(r.from_cache for r in other.generate([req("a")])) and other.take_worked() == []
    # the run's next invocation: "a" twice in one batch is its own call once, then a hit; the engine is not asked
    again = CachedEngine(FakeEngine(cfg), RequestCache(path), Work("runs/r", "inv2", "subject"))
    a1, a2 = again.generate([req("a", request_id="s1"), req("a", request_id="s2")])
    assert again.engine.calls == 0 and (a1.from_cache, a2.from_cache) == (False, True)
    assert (a1.prompt_tokens, a1.latency_s, a1.cached_prompt_tokens, a1.request_id) == \
        (made[0].prompt_tokens, made[0].latency_s, made[0].cached_prompt_tokens, "s1")
    assert again.take_worked() == [cache_key(again.identity(), req("a"))]
    # claimed once: a third invocation (or another actor of the second) no longer gets it
    third = CachedEngine(FakeEngine(cfg), RequestCache(path), Work("runs/r", "inv2", "subject"))
    assert third.generate([req("a")])[0].from_cache
    cache = RequestCache(path)
    cache.settle("runs/r", [cache_key(again.identity(), req("a"))])
    assert len(cache.unsettled("runs/r")) == 1  # "b": still nobody's stored record
    cache.drop_unsettled("runs/r")
    assert cache.unsettled("runs/r") == [] and len(cache) == 2  # the answers themselves stay cached
