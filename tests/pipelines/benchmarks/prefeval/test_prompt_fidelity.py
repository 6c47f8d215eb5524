"""Prompt fidelity (issue 16): the first MCQ samples built with DEFAULT settings, compared byte for
byte with the reference's construction (``benchmark_classification.py`` + ``utils_mcq.py``, chat
path) on the shared data.

The reference's chat messages are ``[user: preference, assistant: pref_generation] + the first 2N
inter-turn messages (roles and contents as in filtered_inter_turns.json) + [user: question +
get_mcq_question_format(options)]``, the preference and question read from ``mcq_options/``.
Everything but the final question's wording is compared under the defaults; the wording is a
documented difference (the reference's texts are not redistributed), so the last test supplies
the reference's suffix (taken from the reference notes) as ``templates.mcq_question`` and then
the whole conversation is byte-equal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.conversation import conversation
from tests.conftest import require_data

REPLY = "LIVE REPLY"
# common_utils.py REMINDER, as quoted in the reference notes
REMINDER = ("\nIn your response, please ensure that you take into account our earlier discussion, and provide an "
            "answer that is consistent with my preference.")


@pytest.fixture(scope="module")
def data() -> Path:
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


def reference_suffix() -> str:
    """The reference's ``get_mcq_question_format`` text with ``{options}`` where the options go."""
    notes = require_data("..", "reference", "REFERENCE_NOTES.md").read_text()
    line = next((ln for ln in notes.splitlines() if "I'm trying to decide on this" in ln), None)
    if line is None:
        pytest.skip("the reference notes no longer quote the MCQ suffix")
    text = line[line.index('`"') + 2: line.rindex('"`')]
    return re.sub(r"\{A\. .*?\}", "{options}", text).replace("\\n", "\n")


def reference_messages(data: Path, cfg: PrefEvalConfig, topic: str, task_id: int, options: list[str],
                       suffix: str | None, remind: bool = False) -> list[dict]:
    """The reference's chat messages for an explicit MCQ pair (system prompt first, as a message)."""
    root = data / "prefeval" / "benchmark_dataset"
    task = json.loads((root / f"mcq_options/{topic}.json").read_text())[task_id]
    flat = [m for chat in json.loads((root / "filtered_inter_turns.json").read_text()) for m in chat["conversation"]]
    n = cfg.turns[0]
    msgs = [{"role": "system", "content": cfg.system_prompt},
            {"role": "user", "content": task["preference"]}, {"role": "assistant", "content": REPLY}]
    msgs += [{"role": m["role"], "content": m["content"]} for m in flat[: 2 * n]]
    formatted = "\n".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(options))
    block = suffix.replace("{options}", formatted) if suffix is not None else ""
    question = task["question"] + (REMINDER if remind else "") + block
    return msgs + [{"role": "user", "content": question}]


def first_samples(data: Path, **over) -> tuple[PrefEvalConfig, list[dict]]:
    cfg = PrefEvalConfig(**{"topics": ["travel_transportation"], "per_topic": 3, **over})
    return cfg, attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))


def test_default_conversation_equals_the_reference_up_to_the_question_wording(data):
    cfg, samples = first_samples(data)
    assert cfg.task == "mcq" and cfg.forms[0] == "explicit" and cfg.turns == [8] and cfg.methods == ["zero-shot"]
    for s in (s for s in samples if s["form"] == "explicit"):
        got = [{"role": m.role, "content": m.content} for m in conversation(cfg, s, REPLY)]
        want = reference_messages(data, cfg, s["topic"], s["task_id"], s["options"], None)
        assert got[:-1] == want[:-1], s["sample_id"]
        assert got[-1]["role"] == "user" and got[-1]["content"].startswith(want[-1]["content"]), s["sample_id"]
        formatted = "\n".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(s["options"]))
        assert formatted in got[-1]["content"], s["sample_id"]


def test_with_the_reference_wording_the_conversation_is_byte_equal(data, tmp_path):
    """The reference's suffix and REMINDER (quoted in the reference notes) as template files."""
    question, reminder = tmp_path / "mcq_question.txt", tmp_path / "reminder.txt"
    question.write_text("{question}{reminder}" + reference_suffix(), encoding="utf-8")
    reminder.write_text(REMINDER, encoding="utf-8")
    cfg, samples = first_samples(data, templates={"mcq_question": str(question), "reminder": str(reminder)},
                                 methods=["zero-shot", "reminder"])
    explicit = [s for s in samples if s["form"] == "explicit"]
    assert len(explicit) == 6
    for s in explicit:
        got = [{"role": m.role, "content": m.content} for m in conversation(cfg, s, REPLY)]
        want = reference_messages(data, cfg, s["topic"], s["task_id"], s["options"], reference_suffix(),
                                  s["method"] == "reminder")
        assert got == want, s["sample_id"]


def test_default_requests_are_sent_as_the_reference_sends_them(data):
    """config.yaml max_mcq_tokens: 5 for the answer and for the live preference reply; no constraint."""
    cfg, samples = first_samples(data)
    stages = {st.name: st for st in BENCHMARK.stages(cfg)}
    for s in (dict(s, pref_reply=REPLY) for s in samples if s["form"] == "explicit"):
        reply, answer = stages["pref_reply"].render(s), stages["answer"].render(s)
        assert [m.content for m in reply.messages] == [cfg.system_prompt, s["preference"]], s["sample_id"]
        assert reply.sampling.max_tokens == answer.sampling.max_tokens == 5, s["sample_id"]
        assert reply.sampling.temperature == answer.sampling.temperature == 0.0, s["sample_id"]
        assert answer.constraint is None, s["sample_id"]
