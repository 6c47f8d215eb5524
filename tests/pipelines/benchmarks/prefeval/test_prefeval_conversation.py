"""PrefEval conversations: layouts, prefix keys and the message sequence of every form,
method and stage (no Ray, no model)."""

import json

import pytest

from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval import conversation as conv
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.prompts import read_templates, template
from llmrec.pipelines.benchmarks.prefeval.samples import build_layout, prefix_of
from tests.conftest import require_data

TOPIC = "travel_restaurant"
SUFFIX = " (Please keep your answer under 300 words.)"


@pytest.fixture(scope="module")
def data():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


@pytest.fixture(scope="module")
def chats(data):
    raw = json.loads((data / "prefeval/benchmark_dataset/filtered_inter_turns.json").read_text())
    return [m for c in raw for m in c["conversation"]]


def build(data, **kw):
    cfg = PrefEvalConfig(**{"topics": [TOPIC], "per_topic": 1, "task": "gen", **kw})
    return cfg, {s["sample_id"]: s for s in attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))}


def roles(msgs):
    return [m.role for m in msgs]


def test_layouts():
    assert build_layout(4) == [["pref"], ["inter", 0, 4]]
    assert build_layout(4, 1.0) == [["inter", 0, 4], ["pref"]]
    assert build_layout(5, 0.5) == [["inter", 0, 3], ["pref"], ["inter", 3, 5]]
    assert build_layout(0) == [["pref"]]
    # two extras at even intervals, a conflicting statement first
    assert build_layout(9, 0.0, 2, True) == [["stmt", "c"], ["pref"], ["inter", 0, 3], ["stmt", "x0"],
                                             ["inter", 3, 6], ["stmt", "x1"], ["inter", 6, 9]]
    assert prefix_of(build_layout(8), "t", "explicit", 3, False) == ("t/explicit/0003", 8)
    assert prefix_of(build_layout(8, 0.5), "t", "choice", 3, False) == ("corpus/t/choice", 4)
    assert prefix_of(build_layout(9, 0.0, 2, True), "t", "explicit", 3, True) == ("t/explicit/0003/c", 3)


def test_explicit_gen_message_sequences_per_method(data, chats):
    methods = ["zero-shot", "reminder", "cot", "rag", "self-critic"]
    cfg, ss = build(data, turns=[3], methods=methods)
    raw = json.loads((data / f"prefeval/benchmark_dataset/explicit_preference/{TOPIC}.json").read_text())[0]
    q = raw["question"]
    head = ["system", "user", "assistant"] + ["user", "assistant"] * 3
    finals = {}
    for m in methods:
        s = ss[f"{TOPIC}/explicit/0000/t003/{m}"]
        s["pref_reply"] = "LIVE"
        if m == "rag":
            s["rag_retrieved"], s["rag_pref_hit"] = [0, 3], True  # retrieval itself: test_prefeval_rag
        msgs = conv.answer_messages(cfg, s)
        assert roles(msgs) == head + ["user"]
        assert msgs[1].content == raw["preference"] and msgs[2].content == "LIVE"
        assert [x.content for x in msgs[3:9]] == [c["content"] for c in chats[:6]]
        finals[m] = msgs[-1].content
    assert finals["zero-shot"] == q + SUFFIX
    assert finals["self-critic"] == finals["zero-shot"]  # the initial answer is the zero-shot one
    assert finals["reminder"] == q + template(read_templates(cfg), "reminder") + SUFFIX
    assert finals["cot"] == template(read_templates(cfg), "cot") + q + SUFFIX
    rag = finals["rag"]
    assert rag.endswith(q + SUFFIX) and "the 2 messages" in rag
    assert f"exchange 1. User: {raw['preference']}\nexchange 2. Assistant: {chats[1]['content']}\n" in rag


def test_self_critic_transcripts(data):
    cfg, ss = build(data, turns=[2], methods=["self-critic"])
    s = ss[f"{TOPIC}/explicit/0000/t002/self-critic"]
    s.update(pref_reply="LIVE", initial_output="FIRST", critique="CRIT")
    crit = conv.critique_messages(cfg, s)
    assert roles(crit) == ["system", "user", "assistant"] + ["user", "assistant"] * 2 + ["user", "assistant", "user"]
    assert crit[-3].content == s["question"]  # the bare question, as the reference shows it
    assert crit[-2].content == "FIRST" and crit[-1].content == template(read_templates(cfg), "critique")
    rev = conv.revision_messages(cfg, s)
    assert rev[:-2] == crit and rev[-2].content == "CRIT"
    assert rev[-1].content.startswith("Revision request") and s["question"] in rev[-1].content
    stages = {st.name: st for st in BENCHMARK.stages(cfg)}
    assert stages["revision"].render(s).sampling.max_tokens == cfg.revision_max_tokens
    assert stages["critique"].render({**s, "method": "zero-shot"}) is None


def test_mcq_methods_and_self_critic(data):
    cfg = PrefEvalConfig(topics=[TOPIC], per_topic=1, turns=[1], methods=["cot", "self-critic", "zero-shot"])
    ss = {s["method"]: s for s in attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))}
    for s in ss.values():
        s["pref_reply"] = "LIVE"
    zero = conv.answer_messages(cfg, ss["zero-shot"])[-1].content
    assert conv.answer_messages(cfg, ss["cot"])[-1].content == template(read_templates(cfg), "cot") + zero
    s = ss["self-critic"]
    s.update(initial_output="<choice>B</choice>", critique="CRIT")
    rev = conv.revision_messages(cfg, s)
    assert rev[-5].content == zero  # question with its options
    assert rev[-4].content == "<choice>B</choice>" and rev[-3].content == template(read_templates(cfg), "critique_mcq")
    assert rev[-1].content.startswith(template(read_templates(cfg), "revision_mcq")) and "\nA. " in rev[-1].content
    stages = {st.name: st for st in BENCHMARK.stages(cfg)}
    revised = stages["revision"].render(s)
    assert revised.constraint is None and revised.sampling.max_tokens == 5  # reference: free-form, max_mcq_tokens
    constrained = {st.name: st for st in BENCHMARK.stages(cfg.model_copy(update={"constrain_choice": True}))}
    assert constrained["revision"].render(s).constraint.choices[0] == "<choice>A</choice>"
    assert stages["answer"].accept(s, _result("<choice>B</choice>")) == {"initial_output": "<choice>B</choice>", "prompt_tokens": 7}
    assert stages["revision"].accept(s, _result("<choice>C</choice>")) == {"output": "<choice>C</choice>"}


def _result(text):
    from llmrec.types import Result

    return Result(text=text, prompt_tokens=7)


def test_implicit_forms_gen(data):
    cfg, ss = build(data, forms=["choice", "persona"], turns=[1], methods=["reminder"])
    choice = ss[f"{TOPIC}/choice/0000/t001/reminder"]
    rec = json.loads((data / f"prefeval/benchmark_dataset/implicit_preference/choice-based/{TOPIC}.json").read_text())[0]
    msgs = conv.answer_messages(cfg, choice)
    assert roles(msgs) == ["system"] + ["user", "assistant"] * 3 + ["user"]  # 2 preference turns + 1 inter
    assert msgs[3].content == rec["conversation"]["user_selection"]
    persona = ss[f"{TOPIC}/persona/0000/t001/reminder"]
    prec = json.loads((data / f"prefeval/benchmark_dataset/implicit_preference/persona-driven/{TOPIC}.json").read_text())[0]
    pm = conv.answer_messages(cfg, persona)
    assert len(pm) == 1 + 2 * len(prec["conversation"]) + 2 + 1
    assert pm[-1].content == prec["question"] + template(read_templates(cfg), "reminder") + SUFFIX
    assert BENCHMARK.stages(cfg)[0].render(persona) is None  # no live reply for implicit forms


def test_position_extras_and_conflict(data, chats, tmp_path):
    conflict = tmp_path / "conflict.jsonl"
    conflict.write_text(json.dumps({"topic": TOPIC, "task_id": 0, "conflicting_preference": "I LOVE THE OPPOSITE."}) + "\n")
    cfg, ss = build(data, turns=[4], positions=["end", "middle"], extra_preferences=[0, 1],
                    conflicting_preferences=str(conflict), methods=["zero-shot"])
    assert len(ss) == 2 * 2 * 2
    end = ss[f"{TOPIC}/explicit/0000/t004/pend/zero-shot"]
    end["pref_reply"] = "LIVE"
    msgs = conv.answer_messages(cfg, end)
    assert [m.content for m in msgs[1:9]] == [c["content"] for c in chats[:8]]
    assert msgs[9].content == end["preference"] and msgs[10].content == "LIVE"
    assert (end["prefix_key"], end["prefix_len"]) == (f"corpus/{TOPIC}/explicit", 4)
    both = ss[f"{TOPIC}/explicit/0000/t004/pmiddle/x1/c/zero-shot"]
    both.update(pref_reply="LIVE", statement_replies={"c": "REPLY-C", "x0": "REPLY-X"})
    msgs = conv.answer_messages(cfg, both)
    texts = [m.content for m in msgs]
    assert texts[1:3] == ["I LOVE THE OPPOSITE.", "REPLY-C"]  # conflicting statement first
    assert texts.index(both["preference"]) > 2 and "REPLY-X" in texts
    extra = dict(both["_statements"])["x0"]
    assert extra != both["preference"] and texts.index(extra) > texts.index(both["preference"])
    stages = {st.name: st for st in BENCHMARK.stages(cfg)}
    reqs = stages["statement_replies"].next_requests({k: v for k, v in both.items() if k != "statement_replies"})
    assert [r.messages[-1].content for r in reqs] == [extra, "I LOVE THE OPPOSITE."]


def test_extras_are_nested_and_stable(data):
    cfg, ss = build(data, turns=[6], extra_preferences=[1, 3], methods=["zero-shot"])
    one = dict(ss[f"{TOPIC}/explicit/0000/t006/x1/zero-shot"]["_statements"])
    three = dict(ss[f"{TOPIC}/explicit/0000/t006/x3/zero-shot"]["_statements"])
    assert one["x0"] == three["x0"] and len(three) == 3
    _, again = build(data, turns=[6], extra_preferences=[1, 3], methods=["zero-shot"])
    assert dict(again[f"{TOPIC}/explicit/0000/t006/x3/zero-shot"]["_statements"]) == three


def test_prefix_groups_share_growing_prefix(data):
    """Samples sharing a prefix_key share their conversation up to prefix_len inter-turn pairs."""
    from llmrec.pipelines.runner.worker import group_by_prefix

    cfg, ss = build(data, turns=[1, 5], methods=["zero-shot", "rag"], positions=["start", "end"])
    groups = group_by_prefix(list(ss.values()))
    for g in groups:
        lens = [s["prefix_len"] for s in g]
        assert lens == sorted(lens, reverse=True)
        longest = g[0]
        for s in g[1:]:
            for x in (longest, s):
                x["pref_reply"] = "LIVE"
            a, b = conv.context_messages(cfg, longest), conv.context_messages(cfg, s)
            shared = 1 + (2 * s["prefix_len"] if s["prefix_key"].startswith("corpus/") else 2 + 2 * s["prefix_len"])
            assert a[:shared] == b[:shared]
    assert {s["prefix_key"] for s in ss.values()} == {f"{TOPIC}/explicit/0000", f"corpus/{TOPIC}/explicit"}
