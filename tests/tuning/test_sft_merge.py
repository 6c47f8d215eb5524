"""`llmrec sft merge`: merged weights are exactly the stated linear combination."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("peft")

import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from llmrec.errors import ConfigError  # noqa: E402
from llmrec.tuning.sft.cli import app  # noqa: E402
from llmrec.tuning.sft.merge import combine, merge  # noqa: E402
from tests.serving.tiny_hf import build_tiny_model  # noqa: E402

Q = "model.layers.0.self_attn.q_proj.weight"


def test_combine_is_the_weighted_sum():
    a, b, c = ({"w": torch.randn(3, 4), "i": torch.arange(3)} for _ in range(3))
    out = combine([a, b, c], [0.2, 0.3, 0.5])
    assert torch.allclose(out["w"], 0.2 * a["w"] + 0.3 * b["w"] + 0.5 * c["w"], atol=1e-6)
    assert torch.equal(out["i"], a["i"])
    with pytest.raises(ConfigError, match="different tensors"):
        combine([a, {"w": a["w"]}], [0.5, 0.5])


def _adapter(base, path, seed):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    model.save_pretrained(path)
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    return (layer.lora_B["default"].weight @ layer.lora_A["default"].weight) * layer.scaling["default"]


def _state(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).state_dict()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "base")


def test_paper_merge_of_three_adapters(tiny, tmp_path):
    """theta = a*theta_pt + b*theta_pr + (1-a-b)*theta_ls, each theta_i = base + its LoRA update."""
    deltas = [_adapter(tiny, tmp_path / n, s) for n, s in (("pt", 1), ("pr", 2), ("ls", 3))]
    w = [0.5, 0.3, 0.2]
    res = CliRunner().invoke(app, ["merge", "--input", str(tmp_path / "pt"), "--weight", "0.5", "--input",
                                   str(tmp_path / "pr"), "--weight", "0.3", "--input", str(tmp_path / "ls"),
                                   "--weight", "0.2", "--out", str(tmp_path / "merged")])
    assert res.exit_code == 0, res.output
    base, merged = _state(tiny), _state(tmp_path / "merged")
    expected = base[Q] + sum(wi * d for wi, d in zip(w, deltas))
    assert torch.allclose(merged[Q], expected, atol=1e-5)
    untouched = "model.layers.0.mlp.up_proj.weight"
    assert torch.allclose(merged[untouched], base[untouched], atol=1e-6)
    assert json.loads((tmp_path / "merged/merge.json").read_text())["base_weight"] == pytest.approx(0.0)


def test_adapter_into_base_and_base_remainder(tiny, tmp_path):
    delta = _adapter(tiny, tmp_path / "a", 7)
    merge([tmp_path / "a"], [1.0], tmp_path / "full", tiny)
    assert torch.allclose(_state(tmp_path / "full")[Q], _state(tiny)[Q] + delta, atol=1e-5)
    # full model inputs, weights not summing to 1: the rest goes to the base
    merge([tmp_path / "full"], [0.25], tmp_path / "quarter", tiny)
    assert torch.allclose(_state(tmp_path / "quarter")[Q], _state(tiny)[Q] + 0.25 * delta, atol=1e-5)
    with pytest.raises(ConfigError, match="give --base"):
        merge([tmp_path / "full"], [0.25], tmp_path / "x")
