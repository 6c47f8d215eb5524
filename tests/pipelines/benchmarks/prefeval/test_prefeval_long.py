"""Long contexts: a 300-turn (298 inter-turn pairs) sample is token-counted and reported
over-context, or truncated oldest-first under `truncation: drop_oldest` (worker, no Ray)."""

import pytest

from llmrec.errors import ContextOverflow

from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval import conversation as conv
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.truncation import pairs_to_drop
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from llmrec.types import Message, Request, Result, SamplingParams
from tests.conftest import require_data


@pytest.fixture(scope="module")
def data():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


def run(cfg, samples, subject, judge=None):
    engines = {"subject": build_engine(subject), "judge": build_engine(judge or {"type": "fake"})}
    return process_samples(BENCHMARK, cfg, samples, engines.__getitem__, retries=0, backoff_s=0)


def test_pairs_to_drop_estimate():
    req = Request(messages=[Message(role="user", content="x" * 1000)], sampling=SamplingParams(max_tokens=50))
    over = Result(finish_reason="over_context", prompt_tokens=500, context_limit=400, error="over the context")
    # 0.5 tokens per char; excess 500 + 50 - 400 = 150 tokens → pairs of 100 chars (50 tokens) → 3
    assert pairs_to_drop([100] * 10, req, over) == 3
    assert pairs_to_drop([1000, 10], req, over) == 1
    assert pairs_to_drop([100] * 30, req, Result(finish_reason="over_context", error="too long")) == 3  # a tenth


VLLM_WORDINGS = [  # vLLM's own 400 texts, as its OpenAI server and Serve LLM app return them
    "This model's maximum context length is 400 tokens. However, you requested 550 tokens (500 in the messages, "
    "50 in the completion). Please reduce the length of the messages or completion.",
    "This model's maximum context length is 400 tokens. However, your request has 500 input tokens. "
    "Please reduce the length of the input messages.",
    "'max_tokens' or 'max_completion_tokens' is too large: 50. This model's maximum context length is 400 tokens "
    "and your request has 500 input tokens (50 > 400 - 500).",
]


@pytest.mark.parametrize("text", VLLM_WORDINGS)
def test_truncation_reads_the_typed_limit_behind_vllms_own_wording(text):
    """The engine edge reads the server's text once; truncation uses the typed numbers (the prose
    regex of before missed these wordings and fell back to dropping a tenth of the pairs)."""
    req = Request(messages=[Message(role="user", content="x" * 1000)], sampling=SamplingParams(max_tokens=50))
    over = Result.over_context(req, ContextOverflow.from_server_text(text, fallback_prompt=1), text)
    assert (over.prompt_tokens, over.context_limit, over.error) == (500, 400, text)
    assert pairs_to_drop([100] * 30, req, over) == 3  # the estimate, not a tenth of 30


def test_298_turns_over_context_then_truncated(data):
    cfg = PrefEvalConfig(topics=["travel_hotel"], per_topic=1, forms=["explicit"], turns=[298], methods=["reminder"],
                         pref_reply_max_tokens=8)
    fake = {"type": "fake", "context_length": 20_000, "default": "<choice>A</choice>"}
    s = attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))[0]
    (out,) = run(cfg, [dict(s)], fake)
    assert out["status"] == "over_context" and out["prompt_tokens"] > 20_000
    assert "_layout" not in out and out["pref_reply"]  # the short preference reply still ran
    # drop_oldest: the oldest inter-turn pairs go until the prompt fits; preference and question stay
    tcfg = cfg.model_copy(update={"truncation": "drop_oldest"})
    s2 = attach_assets(BENCHMARK.build_samples(tcfg, data), BENCHMARK.assets(tcfg, data))[0]
    probe = dict(s2)
    (done,) = run(tcfg, [s2], fake)
    assert done["status"] == "ok" and done["output"] == "<choice>A</choice>" and done["prompt_tokens"] <= 20_000
    dropped = done["dropped_pairs"]
    assert 0 < dropped < 298 and done["truncation_steps"]["answer"] >= 1
    probe.update(pref_reply=done["pref_reply"], dropped_pairs=dropped)
    msgs = conv.answer_messages(tcfg, probe)
    chats = conv.corpus(probe)
    assert msgs[1].content == s["preference"] and msgs[3].content == chats[2 * dropped]["content"]
    assert len(msgs) == 3 + 2 * (298 - dropped) + 1
    # one pair fewer would not have fitted (the estimate drops close to the fewest)
    probe["dropped_pairs"] = dropped - 1
    fake_engine = build_engine(fake)
    assert fake_engine.count_tokens(Request(messages=conv.answer_messages(tcfg, probe))) > 20_000 - 50


def test_truncation_gives_up_when_nothing_left(data):
    cfg = PrefEvalConfig(topics=["travel_hotel"], per_topic=1, forms=["persona"], turns=[2], truncation="drop_oldest")
    s = attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))[0]
    (out,) = run(cfg, [s], {"type": "fake", "context_length": 50})
    assert out["status"] == "over_context" and out["dropped_pairs"] == 2


@pytest.mark.slow
@pytest.mark.model
def test_298_turns_over_context_for_the_embedded_engine(data):
    pytest.importorskip("llama_cpp")
    cfg = PrefEvalConfig(topics=["travel_hotel"], per_topic=1, forms=["choice"], turns=[298])
    s = attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))[0]
    # n_threads given: the default asks Ray for the actor's CPUs, which fails in a driver once Ray is up
    engine = build_engine({"type": "llamacpp", "n_ctx": 8192, "n_threads": 1})
    n = engine.count_tokens(Request(messages=conv.answer_messages(cfg, dict(s))))
    assert n > 50_000  # ~100k tokens with the Gemma 3 tokenizer
    (out,) = process_samples(BENCHMARK, cfg, [s], lambda role: engine, retries=0, backoff_s=0)
    assert out["status"] == "over_context" and out["prompt_tokens"] == n
    assert "8192" in out["error"]
    engine.close()
