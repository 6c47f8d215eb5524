"""`llmrec score`: every task's option values are checked (type and range) before the file is read, each
refusal one line naming the option; the metrics file is strict JSON (an undefined value is null, never a bare
NaN); an id written 1 on one line and "1" on another is one id."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from llmrec.cli import app
from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.registry import SCORE_TASKS
from llmrec.pipelines.runner.scoring import score_file

runner = CliRunner()
HIT = [f"Movie {k}" for k in range(10)]


def _text(res) -> str:
    return " ".join(res.output.split())


def _lrworld(tmp_path, n: int = 4):
    p = tmp_path / "lrw.jsonl"
    p.write_text("".join(json.dumps({"sample_id": f"s{i}", "measure": "m/toy/x", "factor": "memory_item_item",
                                     "gold": "1", "options": HIT, "output": "1", "parsed": "1" if i else "5"}) + "\n"
                         for i in range(n)))
    return p


@pytest.mark.parametrize("value, said", [
    ("-1", "greater than 0"), ("1.5", "less than 1"), ("1", "less than 1"), ("0", "greater than 0"),
    ("nan", "finite number"), ("inf", "finite number"), ("high", "valid number"),
])
def test_lrworld_confidence_out_of_range_is_refused(tmp_path, value, said):
    p = _lrworld(tmp_path)
    res = runner.invoke(app, ["score", "lrworld", "--predictions", str(p), "--option", f"confidence={value}"])
    assert res.exit_code == 2, res.output
    text = _text(res)
    assert text.startswith("error: score task 'lrworld': --option confidence=") and said in text, text
    assert "between 0 and 1" in text and "Traceback" not in res.output


@pytest.mark.parametrize("value", ["-1", "1.5", "x"])
def test_lrworld_seed_must_be_a_whole_number_from_zero(tmp_path, value):
    res = runner.invoke(app, ["score", "lrworld", "--predictions", str(_lrworld(tmp_path)), "--option", f"seed={value}"])
    assert res.exit_code == 2 and "--option seed=" in _text(res), res.output


def test_lrworld_options_in_range_are_used(tmp_path):
    p = _lrworld(tmp_path, 40)
    wide = score_file("lrworld", p, {"confidence": "0.99", "seed": "3"})["metrics"]
    narrow = score_file("lrworld", p, {"confidence": "0.5"})["metrics"]
    assert wide["base/accuracy_ci_low"] <= narrow["base/accuracy_ci_low"] <= narrow["base/accuracy_ci_high"]
    assert narrow["base/accuracy_ci_high"] <= wide["base/accuracy_ci_high"]


def test_the_metrics_file_is_strict_json_with_null_for_an_undefined_value(tmp_path):
    # a noisy pair whose base is never right: relative_drop = (0 - 0) / 0 is undefined (NaN)
    p = tmp_path / "p.jsonl"
    lines = [{"sample_id": f"b{i}|{v}", "base_id": f"b{i}", "variant": v, "measure": "m/toy/x", "factor": "f",
              "gold": "1", "options": HIT, "output": "2", "parsed": "2"} for i in range(2) for v in ("base", "noisy")]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "m.json"
    res = runner.invoke(app, ["score", "lrworld", "--predictions", str(p), "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "NaN" not in text
    metrics = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the metrics file"))["metrics"]
    assert metrics["noisy/factor/f/relative_drop"] is None


@pytest.mark.parametrize("args, said", [
    (["--k", "0"], "--k=0: Input should be greater than or equal to 1"),
    (["--option", "k=two"], "--k='two'"),
])
def test_beyond_utility_k_is_checked_before_the_file_is_read(tmp_path, args, said):
    missing = tmp_path / "never-read.jsonl"  # a bad option is found before the (absent) file
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(missing), "--items", str(missing), *args])
    assert res.exit_code == 2 and said in _text(res), res.output


def test_every_task_with_options_declares_their_types_and_ranges():
    for name in SCORE_TASKS.names():
        task = SCORE_TASKS.get(name)
        if task.options and name != "gistbench":  # gistbench: a model name and an oracle path, any text
            assert task.option_schema is not None, name
            assert set(task.option_schema.model_fields) == set(task.options), name
    res = runner.invoke(app, ["list"])
    assert "lrworld options: confidence (the bootstrap CI's level, a number between 0 and 1 exclusive; default " \
           "0.95), seed" in _text(res), res.output


def test_baselines_config_checks_the_score_options_before_training(tmp_path):
    from llmrec.config import validate
    from llmrec.pipelines.baselines.config import BaselinesConfig

    base = {"candidates": str(tmp_path / "c.jsonl"), "base": {}, "models": [{"model": {"name": "mostpop"}}]}
    with pytest.raises(ConfigError, match=r"score_options.k=0"):
        validate(BaselinesConfig, {**base, "score_options": {"items": "i.jsonl", "k": 0}})
    with pytest.raises(ConfigError, match=r"takes no option\(s\) \['confidence'\]"):
        validate(BaselinesConfig, {**base, "score_options": {"items": "i.jsonl", "k": 5, "confidence": 0.9}})
    assert validate(BaselinesConfig, {**base, "score_options": {"items": "i.jsonl", "k": 5}}).score_options["k"] == 5


def _perrec(group_id, mode="list"):
    return {"group_id": group_id, "mode": mode, "relative_ratings": [1.0, -1.0], "avg_ratings": [3.0, 3.0],
            "prediction": [1, 2]}


def test_perrecbench_group_1_and_group_text_1_are_one_group(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps(_perrec(1)) + "\n" + json.dumps(_perrec("1")) + "\n")
    with pytest.raises(DataError, match=r"p.jsonl: line 2: group_id='1', mode='list' already on line 1"):
        score_file("perrecbench", p)
    p.write_text(json.dumps(_perrec(1)) + "\n" + json.dumps(_perrec("1", "pair")) + "\n")  # one group, two modes
    out = score_file("perrecbench", p)
    assert out["n_lines"] == 2 and not math.isnan(out["metrics"]["ptc"])


def test_perrecbench_is_scored_as_its_file_is_read():
    """The task streams: it takes the lines as a one-pass iterator and gives the same metrics as from a list."""
    from llmrec.pipelines.benchmarks.perrecbench.metrics import score_predictions

    lines = [_perrec(f"g{i}", ("point", "pair", "list")[i % 3]) | {"ratings": [4.0, 2.0]} for i in range(9)]
    lines[0]["prediction"] = [4.5, 1.0]
    assert SCORE_TASKS.get("perrecbench").streams
    once = iter([dict(x) for x in lines])
    assert score_predictions(once) == pytest.approx(score_predictions(lines)) and next(once, None) is None
    got = score_predictions(lines)
    # point lines: errors 0.5, -1 (line 0), then -3, 0 twice: MAE 7.5 / 6, RMSE sqrt(19.25 / 6)
    assert got["mae"] == pytest.approx(1.25) and got["rmse"] == pytest.approx(math.sqrt(19.25 / 6))
    assert got["missed"] == 0 and got["ptc_pair"] == got["ptc_list"] == 1.0
