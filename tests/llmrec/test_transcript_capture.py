"""Transcript capture without Ray: the worker stores, beside every engine call's result, the reference of the
request the engine received (role, message texts by key, the engine-rendered prompt, sampling, constraint), and
the texts resolve back to exactly those messages. Records written before transcripts still read."""

from __future__ import annotations

from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.worker import batch_texts, encode, process_samples
from llmrec.serving.cache import CachedEngine, RequestCache
from llmrec.serving.engine import build_engine
from llmrec.storage import Storage
from llmrec.transcripts import TextStore, calls, resolve, text_key
from llmrec.types import Request, Result
from tests.pipelines.toy.benchmark import NAME


class Recorder:
    """The fake engine, remembering every request it received by request id (the last one wins: a shrunk
    request replaces the one that did not fit), and reporting a rendered prompt like a base-model engine."""

    def __init__(self, render: bool = False, **cfg):
        self.engine = build_engine({"type": "fake", "default": "yes", **cfg})
        self.config = self.engine.config
        self.got: dict[str, list[Request]] = {}
        self.render = render

    def identity(self) -> dict:
        return self.engine.identity()

    def generate(self, requests: list[Request]) -> list[Result]:
        out = self.engine.generate(requests)
        for req, res in zip(requests, out):
            self.got.setdefault(req.request_id, []).append(req)
            if self.render:
                res.prompt_text = "".join(f"<{m.role}>{m.content}\n" for m in req.messages) + "<model>"
        return out


def run(texts: dict | None, engines: dict, **bench) -> list[dict]:
    b = get_benchmark(NAME)
    cfg = benchmark_config({"name": NAME, **bench})
    return process_samples(b, cfg, b.build_samples(cfg, None), engines.__getitem__, retries=0, backoff_s=0.0,
                           texts=texts)


def store_with(tmp_path, texts: dict) -> TextStore:
    store = TextStore(Storage(str(tmp_path / "transcripts")))
    store.add(texts)
    return store


def test_every_call_refers_to_the_request_the_engine_received(tmp_path):
    subject, judge = Recorder(context_length=60), Recorder()
    texts: dict[str, str] = {}
    out = run(texts, {"subject": subject, "judge": judge}, n=4, long=[1], truncate=True, rounds=2, judged=True,
              choices=["yes", "no"])
    store = store_with(tmp_path, texts)
    for rec in out:
        found = resolve(calls(rec), store)
        # ask, two loop rounds, the judge: every call, in order
        assert [(c.stage, c.index, c.role) for c in found] == [("ask", 0, "subject"), ("follow", 0, "subject"),
                                                                ("follow", 1, "subject"), ("judge", 0, "judge")]
        assert [c.request["seq"] for c in found] == [0, 1, 2, 3]
        ids = [f"{rec['sample_id']}:ask", f"{rec['sample_id']}:follow:0:0", f"{rec['sample_id']}:follow:1:0",
               f"{rec['sample_id']}:judge"]
        for c, rid in zip(found, ids):
            sent = (judge if c.role == "judge" else subject).got[rid][-1]
            assert c.messages == [m.model_dump() for m in sent.messages] and not c.missing
            assert c.request["sampling"] == sent.sampling.model_dump(mode="json")
            assert c.result["text"] == "yes" and "request_id" not in c.result
        assert found[0].request["constraint"] == ({"choices": ["yes", "no"]} if rec["sample_id"] != "toy-1" else None)
        assert found[1].request["constraint"] is None
    long = next(r for r in out if r["sample_id"] == "toy-1")
    first, last = subject.got["toy-1:ask"][0], subject.got["toy-1:ask"][-1]
    assert len(subject.got["toy-1:ask"]) > 1 and len(last.messages[0].content) < len(first.messages[0].content)
    # the stored request is the shrunk one that fit, not the first that did not
    assert resolve(calls(long), store)[0].messages[0]["content"] == last.messages[0].content


def test_rendered_prompt_is_stored_once_not_in_the_record(tmp_path):
    eng = Recorder(render=True)
    texts: dict[str, str] = {}
    out = run(texts, {"subject": eng}, n=2, rounds=1)
    entry = out[0]["outputs"]["ask"]
    # the rendered prompt is kept as its pieces: the message texts (stored once as messages) and the engine's
    # turn markers between them, so a long conversation is not stored a second time inside its prompt
    assert "prompt_text" not in entry and entry["request"]["prompt"] == [
        text_key("<user>"), text_key("question 0"), text_key("\n<model>")]
    [c, _] = resolve(calls(out[0]), store_with(tmp_path, texts))
    assert c.prompt == "<user>question 0\n<model>"


def test_prompt_pieces_reuse_the_message_texts():
    from llmrec.transcripts import prompt_parts

    history = ["a long shared turn " * 200, "another shared turn " * 200]
    prompt = "<s>" + "\n".join(f"[{t}]" for t in history) + "</s>"
    parts = prompt_parts(prompt, history)
    assert "".join(parts) == prompt and history[0] in parts and history[1] in parts
    assert sum(len(p) for p in parts if p not in history) < 20  # only the markers are new text
    # a message the prompt does not hold in order leaves the rest whole: still the exact prompt
    assert "".join(prompt_parts("xyz", ["nope", "y"])) == "xyz"


def test_without_texts_nothing_is_captured():
    out = run(None, {"subject": Recorder(render=True)}, n=2, rounds=1)
    assert all("request" not in e and "prompt_text" not in e for r in out for e in [r["outputs"]["ask"]])


def test_a_cache_hit_still_gets_its_reference(tmp_path):
    cache = RequestCache(tmp_path / "cache.sqlite")
    first, again = {}, {}
    cold = run(first, {"subject": CachedEngine(Recorder(render=True), cache)}, n=3, rounds=1)
    warm = run(again, {"subject": CachedEngine(Recorder(render=True), cache)}, n=3, rounds=1)
    assert all(e["from_cache"] for r in warm for e in [r["outputs"]["ask"]])
    for a, b in zip(cold, warm):
        ra, rb = a["outputs"]["ask"]["request"], b["outputs"]["ask"]["request"]
        assert rb["messages"] == ra["messages"] and rb["role"] == "subject"
        assert "prompt" not in rb  # the cache keeps answers, not the (long) rendered prompts
    assert set(again) <= set(first)
    assert "prompt_text" not in cache._conn.execute("SELECT result FROM responses").fetchone()[0]


def test_batch_texts_travel_once_per_batch():
    out = encode([[{"sample_id": "a"}], [{"sample_id": "b"}]], {"worker_s": 1.0}, {"k1": "x", "k2": "y"})
    assert out["texts"][1] == "{}" and batch_texts(out) == {"k1": "x", "k2": "y"}
    assert "texts" not in encode([[{"sample_id": "a"}]], {}) and batch_texts({"group": []}) == {}


def test_records_written_before_transcripts_still_read(tmp_path):
    from llmrec.pipelines.common.store import ResultStore

    old = {"sample_id": "s1", "status": "ok", "error": None,
           "outputs": {"answer": {"text": "<choice>A</choice>", "finish_reason": "stop", "prompt_tokens": 9}}}
    st = ResultStore(tmp_path / "results")
    st.write([old])
    rec = st.load()["s1"]
    [c] = resolve(calls(rec), TextStore(Storage(str(tmp_path / "transcripts"))))
    assert c.request is None and c.role == "subject" and c.result["text"] == "<choice>A</choice>"
    assert c.messages == [] and c.missing == []


def test_calls_keep_the_order_the_sample_made_them():
    """The result store writes records with sorted keys; the references' ``seq`` restores the call order."""
    ref = {"role": "subject", "messages": [], "sampling": {}, "constraint": None}
    rec = {"outputs": {"answer": {"text": "B", "request": {**ref, "seq": 1}},
                       "pref_reply": {"text": "A", "request": {**ref, "seq": 0}}}}
    assert [c.stage for c in calls(rec)] == ["pref_reply", "answer"]
