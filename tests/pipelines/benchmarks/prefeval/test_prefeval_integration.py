"""PrefEval end to end on a local Ray: every method of both tasks with the scripted engine as
subject and judge; the embedded llama.cpp model as subject and judge on two samples (slow)."""

from __future__ import annotations

import json

import pytest
import yaml

from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from llmrec.pipelines.runner.scoring import score_file
from llmrec.pipelines.common.store import ResultStore
from tests.pipelines.conftest import config

METHODS = ["zero-shot", "reminder", "self-critic", "cot", "rag"]
SUBJECT = {"type": "fake", "default": "Try the Grand Hotel downtown, it is lively at night.",
           "rules": [{"contains": "Critique request", "reply": "Critique: it ignored the preference."},
                     {"contains": "Revision request", "reply": "Response: a quiet countryside inn."}]}
JUDGE = {"type": "fake", "default": "<answer>Yes</answer>", "rules": [
    {"contains": "acknowledges any user preference", "reply": "<preference>quiet</preference><answer>Yes</answer>"},
    {"contains": "substantive response", "reply": "<answer>Yes</answer>"},
    {"contains": "Original user preference", "reply": "<answer>No</answer>"},
    {"contains": "quiet countryside inn", "reply": "<explanation>fine</explanation><answer>No</answer>"},
    {"contains": "violates the user's stated preference", "reply": "<answer>Yes</answer>"},
]}


def with_judge(path, judge, **sections):
    raw = yaml.safe_load(path.read_text())
    raw.update(judge=judge, **sections)
    path.write_text(yaml.safe_dump(raw))
    return path


def test_generation_all_methods_fake_engines(tmp_path, data_root, local_ray):
    path = with_judge(config(tmp_path, engine=SUBJECT, task="gen", topics=["travel_hotel"], per_topic=1,
                             forms=["explicit", "choice"], turns=[0, 2], methods=METHODS), JUDGE)
    out = run_evaluation(load_run_config(path), data_root)
    m = out.metrics
    assert m["n_samples"] == 2 * 2 * 5 and m["n_judged"] == 20 and m["failed"] == 0
    # the judge says "violates" unless the answer is the revised one: self-critic is the only correct method
    assert m["accuracy.method.self-critic"] == 1.0 and m["accuracy.method.zero-shot"] == 0.0
    assert m["inconsistent_violation"] == pytest.approx(16 / 20) and m["judge_failed"] == 0
    recs = ResultStore(out.run_dir / "results").load()
    sc = recs["travel_hotel/explicit/0000/t002/self-critic"]
    assert sc["initial_output"].startswith("Try the Grand") and sc["critique"].startswith("Critique")
    assert sc["output"].startswith("Response: a quiet") and set(sc["outputs"]) >= {
        "pref_reply", "answer", "critique", "revision", "judge_acknowledge", "judge_hallucinate"}
    rag = recs["travel_hotel/explicit/0000/t002/rag"]
    assert len(rag["rag_retrieved"]) == 5 and rag["rag_pref_hit"] is True
    assert all(r["judge_acknowledge"].endswith("<answer>Yes</answer>") for r in recs.values())
    # metrics equal a recomputation from the predictions file (the score contract)
    scored = score_file("prefeval-gen", out.files["predictions"])["metrics"]
    assert scored["accuracy"] == pytest.approx(m["accuracy"]) and scored["judge_failed"] == 0
    plots = {p.name for p in (out.run_dir / "plots").iterdir()}
    assert {"accuracy_by_turns.png", "error_types_by_method.png"} <= plots
    assert out.stats["prefix_cache_hit_rate"] >= 0.0 and out.stats["prompt_tokens"] > 0


def test_mcq_all_methods_fake_engine(tmp_path, data_root, local_ray):
    engine = {"type": "fake", "default": "<choice>A</choice>",
              "rules": [{"contains": "Revision request", "reply": "<choice>B</choice>"},
                        {"contains": "Critique request", "reply": "Critique: fine."}]}
    path = config(tmp_path, engine=engine, topics=["travel_hotel"], per_topic=2, forms=["explicit"], turns=[2],
                  methods=METHODS, positions=["start", "end"], extra_preferences=[0, 1])
    out = run_evaluation(load_run_config(path), data_root)
    assert out.metrics["n_samples"] == 2 * 5 * 2 * 2 and out.metrics["n_answered"] == 40
    recs = ResultStore(out.run_dir / "results").load().values()
    assert {r["output"] for r in recs if r["method"] == "self-critic"} == {"<choice>B</choice>"}
    assert {r["output"] for r in recs if r["method"] != "self-critic"} == {"<choice>A</choice>"}
    assert all(r["statement_replies"] for r in recs if r["extra_prefs"] == 1)
    assert "accuracy.position.end" in out.metrics and "accuracy.extra_prefs.1" in out.metrics
    assert (out.run_dir / "plots" / "accuracy_by_position.png").is_file()


@pytest.mark.slow
@pytest.mark.model
def test_embedded_model_as_subject_and_judge(tmp_path, data_root, local_ray):
    pytest.importorskip("llama_cpp")
    llama = {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1}
    path = with_judge(config(tmp_path, engine=llama, task="gen", topics=["travel_restaurant"], per_topic=2,
                             forms=["choice"], turns=[0], methods=["reminder"], gen_max_tokens=16,
                             judge_max_tokens=8), llama,
                      tracking={"enabled": False})  # no MLflow store: nothing here reads one, creating it costs seconds
    out = run_evaluation(load_run_config(path), data_root)
    m = out.metrics
    assert m["n_samples"] == 2 and m["n_judged"] == 2 and m["failed"] == 0
    assert 0.0 <= m["accuracy"] <= 1.0 and 0.0 <= m["judge_failure_rate"] <= 1.0
    lines = [json.loads(x) for x in out.files["predictions"].read_text().splitlines()]
    assert all(isinstance(x["acknowledge"], str) and x["response"] for x in lines)
