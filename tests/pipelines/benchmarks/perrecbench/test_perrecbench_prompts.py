"""Prompt rendering: byte-equal to the reference's shipped rendered inputs given the same user data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.perrecbench import prompts
from llmrec.pipelines.benchmarks.perrecbench.config import PromptConfig
from tests.conftest import require_data

RUN = "abs_rating/deepseek-chat/0shot/all/exp0-profile/k4"
USER = re.compile(r"<\|The Start of User Data\|>\n## User Profile\n(?P<profile>.*?)\n\n## User Most Common Rating\n"
                  r"(?P<mc>[0-9.]+)\n\n## User Average Rating\n(?P<avg>[0-9.]+)\n(?P<items>.*)<\|The End of User Data\|>\n",
                  re.S)
ITEM = re.compile(r"\n### Item Title\n(?P<title>.*?)\n(?:### Item Author\n(?P<author>.*?)\n)?### User Rating\n"
                  r"(?P<rating>[0-9.]+)\n", re.S)
QUERY = re.compile(r"<\|The Start of Query Item Information\|>\n### Item Title\n(?P<title>.*?)\n"
                   r"(?:### Item Author\n(?P<author>.*?)\n)?<\|The End of Query Item Information\|>", re.S)


def user_data(prompt: str) -> tuple[dict, str]:
    """The user data a shipped point prompt was rendered from: stats, retrieved items, profile."""
    m = USER.search(prompt)
    items = [{"title": i["title"], "author": i["author"], "rating": float(i["rating"])} for i in ITEM.finditer(m["items"])]
    return {"avg_rating": float(m["avg"]), "most_common_rating": float(m["mc"]), "retrieved": items}, m["profile"]


def query_data(prompt: str) -> dict:
    m = QUERY.search(prompt)
    return {"title": m["title"], "author": m["author"]}


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return require_data("perrecbench", "code", "templates_point", "0ours", "0ours0.txt").parents[4]


@pytest.mark.parametrize("level", ["easy", "medium", "hard"])
def test_point_and_list_prompts_match_the_shipped_inputs(level, data_dir):
    """Point prompts re-render byte for byte from their own user data; the list prompt of each
    group, rendered from the users of the group's point prompts, equals the shipped group input."""
    run = data_dir / "perrecbench" / "code" / f"result-{level}" / RUN
    point = json.loads((run / "processed-point/input/0-sc1.json").read_text())
    group = json.loads((run / "processed-group/input/0-sc1.json").read_text())
    cfg = PromptConfig(templates="reference")
    tp, tl = prompts.load_templates(cfg, "point", data_dir), prompts.load_templates(cfg, "list", data_dir)
    assert list(point) == list(group) and len(point) == 200
    for key, (shipped_point,) in point.items():
        users, profiles = [], []
        for shipped in shipped_point:
            user, profile = user_data(shipped)
            query = query_data(shipped)
            assert prompts.point_prompt(tp["user"], user, profile, query) == shipped, key
            users.append(user)
            profiles.append(profile)
        assert prompts.list_prompt(tl["user"], users, profiles, query) == group[key][0][0], key


def test_reference_templates_are_converted_once_per_format_pass(data_dir):
    t = prompts.load_templates(PromptConfig(templates="reference"), "list", data_dir)
    assert '{"predicted_ranking": <user_ranking>}' in t["user"] and "{{" not in t["user"]
    assert t["system"].endswith('{"predicted_ranking": <user_ranking>}')
    pair = prompts.load_templates(PromptConfig(templates="reference"), "pair", data_dir)
    assert pair["user"].startswith("[User A]\n{user_a}\n\n[User B]\n{user_b}\n\n\n[Query Item Details]\n{query}")
    assert prompts.load_templates(PromptConfig(templates="reference", cot=True), "point", data_dir)["user"] \
        .endswith("Answer: Let's think step by step.")


def test_missing_reference_templates_fail_naming_the_file(tmp_path):
    with pytest.raises(DataError, match="0ours0.txt.*prompt.templates: builtin"):
        prompts.load_templates(PromptConfig(), "point", tmp_path)


def test_reference_wording_is_the_default():
    """Issue 16: defaults reproduce the paper; our own wording is the named option ``builtin``."""
    assert PromptConfig().templates == "reference" and PromptConfig().cot is False


@pytest.mark.parametrize("mode", ["point", "pair", "list"])
@pytest.mark.parametrize("cot", [False, True])
def test_builtin_templates_have_their_placeholders(mode, cot):
    t = prompts.load_templates(PromptConfig(templates="builtin", cot=cot), mode, None)
    fields = ("{user_a}", "{user_b}", "{query}") if mode == "pair" else ("{users}", "{query}")
    assert all(f in t["user"] for f in fields) and t["system"] and "{history}" in t["profile"]


USER_X = {"avg_rating": 3.25, "most_common_rating": 4.0,
          "retrieved": [{"title": "A {query} title", "author": "Ann", "rating": 4}, {"title": "B", "rating": 2.5}]}


def test_user_blocks_per_mode_and_one_pass_fill():
    point = prompts.point_prompt("{users}|{query}", USER_X, "likes {users}", {"title": "Q"})
    assert point.startswith("<|The Start of User Data|>\n## User Profile\nlikes {users}\n\n## User Most Common Rating"
                            "\n4.0\n\n## User Average Rating\n3.2\n\n### Item Title\nA {query} title\n### Item Author"
                            "\nAnn\n### User Rating\n4.0\n\n### Item Title\nB\n### User Rating\n2.5\n<|The End of")
    pair = prompts.user_block(USER_X, None, "pair")
    assert pair == ("<|The Start of User Data|>\n\n### Item Title\nA {query} title\n### Item Author\nAnn\n"
                    "### User Rating\n4.0\n\n\n### Item Title\nB\n### User Rating\n2.5\n\n<|The End of User Data|>\n")
    listed = prompts.user_block(USER_X, None, "list", 2)
    assert listed.startswith("<|The Start of User2 Data|>\n") and "### User2 Rating\n2.5" in listed
    assert listed.endswith("<|The End of User2 Data|>\n\n")


def test_messages_can_fold_the_system_text_into_the_user_turn():
    assert [m.role for m in prompts.messages("S", "U", False)] == ["system", "user"]
    (only,) = prompts.messages("S", "U", True)
    assert only.role == "user" and only.content == "S\n\nU"
