"""PrefEval defaults reproduce the reference's MCQ script (config.yaml ``max_mcq_tokens: 5``, no answer
constraint, the 5-token cap on the explicit preference's live reply too); the options that differ are
recorded in the run's ``protocol`` tag."""

from __future__ import annotations

import json

import pytest

from llmrec import tracking
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.protocol import attach_assets, protocol_record
from tests.conftest import require_data

PREFERENCE = [{"role": "user", "content": "I dislike crowded tourist spots."}]


def protocol_tag(cfg: PrefEvalConfig) -> dict:
    return json.loads(tracking.run_tags("run", protocol_record(BENCHMARK, cfg))[tracking.TAG_PROTOCOL])


def pref_reply_request(cfg: PrefEvalConfig):
    stage = next(st for st in BENCHMARK.stages(cfg) if st.name == "pref_reply")
    return stage.render({"form": "explicit", "_preference": PREFERENCE, "prefix_key": "k"})


def test_protocol_tag_records_every_option_that_changes_the_answers():
    tag = protocol_tag(PrefEvalConfig())
    for key in ("constrain_choice", "answer_max_tokens", "pref_reply_max_tokens", "gen_max_tokens", "templates",
                "system_prompt"):
        assert key in tag, sorted(tag)


def test_constrain_choice_default_is_free_form():
    cfg = PrefEvalConfig()
    assert cfg.constrain_choice is False and protocol_tag(cfg)["constrain_choice"] is False
    assert protocol_tag(PrefEvalConfig(constrain_choice=True))["constrain_choice"] is True


def test_answer_max_tokens_default_is_max_mcq_tokens():
    cfg = PrefEvalConfig()
    assert cfg.answer_max_tokens == 5 and protocol_tag(cfg)["answer_max_tokens"] == 5


def test_pref_reply_cap_follows_the_task_unless_overridden():
    mcq, gen = PrefEvalConfig(), PrefEvalConfig(task="gen")
    assert mcq.pref_reply_max_tokens is None and protocol_tag(mcq)["pref_reply_max_tokens"] is None
    assert pref_reply_request(mcq).sampling.max_tokens == 5  # the MCQ script's max_tokens=5 truncates it too
    assert pref_reply_request(gen).sampling.max_tokens == 300  # the generation script's max_gen_tokens
    assert pref_reply_request(PrefEvalConfig(answer_max_tokens=7)).sampling.max_tokens == 7
    over = PrefEvalConfig(pref_reply_max_tokens=64)
    assert pref_reply_request(over).sampling.max_tokens == 64 and protocol_tag(over)["pref_reply_max_tokens"] == 64
    with pytest.raises(ValueError):
        PrefEvalConfig(pref_reply_max_tokens=0)


def test_default_mcq_answer_request_is_free_form_in_five_tokens():
    data = require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
    cfg = PrefEvalConfig(topics=["travel_restaurant"], per_topic=1, turns=[1])
    (s,) = attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))
    s["pref_reply"] = "Noted"
    answer = next(st for st in BENCHMARK.stages(cfg) if st.name == "answer").render(s)
    assert answer.constraint is None and answer.sampling.max_tokens == 5
    option = PrefEvalConfig(topics=["travel_restaurant"], per_topic=1, turns=[1], constrain_choice=True)
    constrained = next(st for st in BENCHMARK.stages(option) if st.name == "answer").render(s)
    assert constrained.constraint.choices == [f"<choice>{c}</choice>" for c in "ABCD"]
