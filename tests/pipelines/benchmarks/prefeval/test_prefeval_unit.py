"""PrefEval MCQ: conversation structure, options, parsing and metrics (no Ray, no model)."""

import json
import subprocess
import sys

import pytest

from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.metrics import mcq_metrics, score_predictions
from llmrec.pipelines.benchmarks.prefeval.parsing import parse_choice
from llmrec.pipelines.benchmarks.prefeval.conversation import conversation
from llmrec.pipelines.benchmarks.prefeval.prompts import mcq_question, read_templates, shuffle_options
from llmrec.types import Result
from tests.conftest import require_data


@pytest.mark.parametrize("text,expected", [
    ("<choice>B</choice>", "B"),
    ("Sure! <choice> C </choice> because", "C"),
    ("<choice>[A/B/C/D]</choice>", "A"),  # the reference's regex takes the first letter
    ("<choice>b</choice>", None),  # lower case is not matched
    ("<choice><b>B</b> and more</choice>", None),  # .string is None for mixed content
    ("The answer is B", None),
    ("<choice>E</choice>", None),
    ("", None),
    (None, None),
    ("<choice>D", "D"),  # unclosed tag: html.parser still yields the tag
])
def test_parse_choice(text, expected):
    assert parse_choice(text) == expected


@pytest.mark.integration  # another interpreter (hash seed)
def test_shuffle_keeps_gold_and_is_stable_across_processes():
    opts = ["right", "w1", "w2", "w3"]
    shuffled, gold = shuffle_options(opts, 41, "travel_hotel", 7)
    assert sorted(shuffled) == sorted(opts) and shuffled["ABCD".index(gold)] == "right"
    code = ("from llmrec.pipelines.benchmarks.prefeval.prompts import shuffle_options;"
            "print(shuffle_options(['right','w1','w2','w3'], 41, 'travel_hotel', 7))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout
    assert out.strip() == str((shuffled, gold))
    golds = {shuffle_options(opts, 41, "t", i)[1] for i in range(40)}
    assert golds == set("ABCD")  # gold positions vary


def test_reminder_and_question_template():
    cfg = PrefEvalConfig(topics=["travel_hotel"])
    q0 = mcq_question(read_templates(cfg), "Where to stay?", ["a", "b", "c", "d"], "zero-shot")
    q1 = mcq_question(read_templates(cfg), "Where to stay?", ["a", "b", "c", "d"], "reminder")
    assert q0.startswith("Where to stay?") and "A. a\nB. b\nC. c\nD. d" in q0 and "<choice>" in q0
    assert q1.startswith("Where to stay?\n") and len(q1) > len(q0) and "preference" in q1


def test_custom_template_file(tmp_path):
    t = tmp_path / "q.txt"
    t.write_text("{question}{reminder} || {options}")
    cfg = PrefEvalConfig(templates={"mcq_question": str(t)})
    texts = read_templates(cfg)  # on the driver; the file may be gone when stages render
    t.unlink()
    assert mcq_question(texts, "Q {x}?", ["a", "b", "c", "d"], "zero-shot") == "Q {x}? || A. a\nB. b\nC. c\nD. d"


@pytest.fixture(scope="module")
def data():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


def build(data, **kw):
    cfg = PrefEvalConfig(**{"topics": ["travel_restaurant"], "per_topic": 2, **kw})
    return cfg, attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))


def test_explicit_conversation_structure(data):
    cfg, samples = build(data, turns=[3], methods=["reminder"])
    s = samples[0]
    raw = json.loads((data / "prefeval/benchmark_dataset/explicit_preference/travel_restaurant.json").read_text())[0]
    chats = json.loads((data / "prefeval/benchmark_dataset/filtered_inter_turns.json").read_text())
    msgs = conversation(cfg, s, "LIVE REPLY")
    roles = [m.role for m in msgs]
    assert roles == ["system", "user", "assistant"] + ["user", "assistant"] * 3 + ["user"]
    assert msgs[1].content == raw["preference"] and msgs[2].content == "LIVE REPLY"
    flat = [m for c in chats for m in c["conversation"]]
    assert [m.content for m in msgs[3:9]] == [m["content"] for m in flat[:6]]
    assert msgs[-1].content.startswith(raw["question"])
    assert s["sample_id"] == "travel_restaurant/explicit/0000/t003/reminder"


def test_implicit_forms_structure(data):
    cfg, samples = build(data, forms=["choice", "persona"], turns=[0])
    choice = next(s for s in samples if s["form"] == "choice")
    msgs = conversation(cfg, choice, None)
    rec = json.loads((data / "prefeval/benchmark_dataset/implicit_preference/choice-based/travel_restaurant.json").read_text())[0]
    assert [m.content for m in msgs[1:5]] == [rec["conversation"][k] for k in
                                              ("query", "assistant_options", "user_selection", "assistant_acknowledgment")]
    assert len(msgs) == 6  # system + 4 + question (0 inter-turns)
    persona = next(s for s in samples if s["form"] == "persona")
    pm = conversation(cfg, persona, None)
    assert [m.role for m in pm[1:-1]] == ["user", "assistant"] * (len(pm[1:-1]) // 2)
    # explicit needs the live reply stage; implicit forms skip it
    reply_stage = BENCHMARK.stages(cfg)[0]
    assert reply_stage.render(choice) is None


def test_options_come_from_mcq_file_with_gold(data):
    cfg, samples = build(data)
    mcq = json.loads((data / "prefeval/benchmark_dataset/mcq_options/travel_restaurant.json").read_text())
    for s in samples:
        right = mcq[s["task_id"]]["classification_task_options"][0]
        assert s["options"]["ABCD".index(s["gold"])] == right


def test_mcq_explicit_preference_text_comes_from_mcq_options(data):
    """The reference's MCQ script reads the explicit preference from mcq_options/ (30 of 1000 differ)."""
    root = data / "prefeval/benchmark_dataset"
    mcq = json.loads((root / "mcq_options/travel_transportation.json").read_text())
    explicit = json.loads((root / "explicit_preference/travel_transportation.json").read_text())
    differ = [i for i, (m, e) in enumerate(zip(mcq, explicit)) if m["preference"] != e["preference"]]
    assert differ, "the shared data no longer has a differing statement in this topic"
    cfg = PrefEvalConfig(topics=["travel_transportation"], per_topic=differ[0] + 1, turns=[0],
                         methods=["zero-shot"])
    s = attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))[-1]
    assert s["task_id"] == differ[0] and s["preference"] == mcq[differ[0]]["preference"]
    assert conversation(cfg, s, "R")[1].content == mcq[differ[0]]["preference"]
    gen = BENCHMARK.build_samples(cfg.model_copy(update={"task": "gen"}), data)[-1]
    assert gen["preference"] == explicit[differ[0]]["preference"]  # the generation task keeps explicit_preference/


def test_turn_bounds_and_bad_data(tmp_path):
    from llmrec.errors import ConfigError, DataError
    from llmrec.config import validate

    with pytest.raises(ConfigError, match="298"):
        validate(PrefEvalConfig, {"turns": [299]}, "benchmark")
    root = tmp_path / "prefeval/benchmark_dataset"
    (root / "mcq_options").mkdir(parents=True)
    (root / "filtered_inter_turns.json").write_text("[]")
    (root / "mcq_options/travel_hotel.json").write_text('[{"preference": 1,}')
    with pytest.raises(DataError, match=r"mcq_options/travel_hotel.json: malformed JSON at line 1"):
        BENCHMARK.build_samples(PrefEvalConfig(topics=["travel_hotel"], turns=[0]), tmp_path)
    (root / "mcq_options/travel_hotel.json").write_text('[{"preference": "p", "question": "q"}]')
    with pytest.raises(DataError, match="record 0 lacks"):
        BENCHMARK.build_samples(PrefEvalConfig(topics=["shop_home", "travel_hotel"][1:], turns=[0]), tmp_path)


def test_metrics_and_score_contract():
    lines = [
        {"sample_id": "1", "gold": "A", "output": "<choice>A</choice>", "turns": 2},
        {"sample_id": "2", "gold": "B", "output": "<choice>C</choice>", "turns": 2},
        {"sample_id": "3", "gold": "C", "output": "no idea", "turns": 10},
        {"sample_id": "4", "gold": "D", "output": "<choice>D</choice>", "turns": 10},
    ]
    m = score_predictions(lines)
    assert m["accuracy"] == 0.5 and m["missed_rate"] == 0.25
    assert m["accuracy.turns.2"] == 0.5 and m["accuracy.turns.10"] == 0.5
    rows = [{"status": "ok", "correct": True, "missed": False}, {"status": "failed"}, {"status": "over_context"}]
    m2 = mcq_metrics(rows)
    assert m2["accuracy"] == 1.0 and m2["failed"] == 1 and m2["over_context"] == 1 and m2["n_samples"] == 3


def test_answer_stage_records_tokens():
    cfg = PrefEvalConfig()
    accept = BENCHMARK.stages(cfg)[1].accept
    assert accept({}, Result(text="<choice>A</choice>", prompt_tokens=42)) == {"output": "<choice>A</choice>", "prompt_tokens": 42}


def test_a_data_file_that_is_a_directory_is_named_as_one(tmp_path):
    """A topic file (or judge prompt) that is a directory: the error says so, not "missing … run data fetch"."""
    from llmrec.errors import DataError
    from llmrec.pipelines.benchmarks.prefeval.data import FORM_DIRS, ROOT, judge_prompt, load_topic

    (tmp_path / ROOT / FORM_DIRS["explicit"] / "travel_hotel.json").mkdir(parents=True)
    with pytest.raises(DataError, match="travel_hotel.json is a directory, not a JSON file") as e:
        load_topic(tmp_path, "explicit", "travel_hotel")
    assert "missing" not in str(e.value)
    (tmp_path / "judge.txt").mkdir()
    with pytest.raises(DataError, match="judge.txt is a directory"):
        judge_prompt(tmp_path, "violate", tmp_path / "judge.txt")
