"""What tells a suite's subjects apart in MLflow: their runs' params, their names, and the shared view's columns."""

from __future__ import annotations

import json

from llmrec import tracking
from llmrec.pipelines.runner.report import child_name
from llmrec.pipelines.runner.suite import entry_run_name, subject_run_name


def test_subject_params_carry_identity_and_the_options_that_differ():
    engines = {"gemma": {"type": "llamacpp", "model_path": None, "n_ctx": 8192, "choice_mode": "score",
                         "n_threads": 2, "api_key": "sk-1"},
               "gemma-grammar": {"type": "llamacpp", "model_path": "/m/gemma-3-270m-it-Q8_0.gguf", "n_ctx": 8192,
                                 "choice_mode": "grammar", "n_threads": 2, "api_key": "sk-2"}}
    p = tracking.subject_params(engines)
    assert p["gemma"] == {"engine.type": "llamacpp", "engine.model": "embedded", "engine.choice_mode": "score"}
    assert p["gemma-grammar"]["engine.model"] == "/m/gemma-3-270m-it-Q8_0.gguf"
    assert p["gemma-grammar"]["engine.quantization"] == "Q8_0" and p["gemma-grammar"]["engine.choice_mode"] == "grammar"
    assert "engine.n_ctx" not in p["gemma"]  # the same for both: not what tells them apart
    assert tracking.view_params(p) == ["engine.type", "engine.model", "engine.choice_mode", "engine.quantization"]
    assert "sk-" not in json.dumps(p)  # an API key differs between subjects too, and is never a param
    assert tracking.quantization({"type": "vllm", "model": "x", "dtype": "bfloat16"}) == "bfloat16"
    assert tracking.quantization({"type": "vllm", "model": "org/model", "dtype": "auto"}) is None


def test_run_names_lead_with_what_differs():
    assert subject_run_name("suite-demo", "gemma-grammar") == "gemma-grammar · suite-demo"
    assert entry_run_name("gemma-grammar", "prefeval") == "prefeval · gemma-grammar"
    assert child_name("prefeval · gemma", ["turns"], {"task": "mcq", "turns": 10}) == "turns=10 · prefeval · gemma"


def test_view_lists_metrics_in_the_order_given_then_params_oldest_runs_first():
    view = json.loads(tracking.view_state(["prefeval.accuracy", "prefeval.accuracy_ci_low", "gistbench.is@10"],
                                          ["engine.model"]))
    assert view["selectedColumns"] == ["attributes.`Run Name`", "metrics.`prefeval.accuracy`",
                                       "metrics.`prefeval.accuracy_ci_low`", "metrics.`gistbench.is_at_10`",
                                       "params.`engine.model`"]
    assert view["orderByKey"] == "attributes.start_time" and view["orderByAsc"] is True
