"""Prompt fidelity (issue 16): the first samples built with DEFAULT settings render, byte for byte,
the prompts the reference's construction (``code/utils.py``: ``make_template_point``,
``make_template_group``, ``user_template_pair``, ``encode_history``, ``encode_query``) builds
from the same user data with its own template files (``<data dir>/perrecbench/code``).

The reference construction is re-implemented here from those notes: the user-block skeleton is
``str.format``-ed into the template first (``"{}"`` kept for the query), then every value is
filled in a second ``format`` pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmrec.pipelines.benchmarks.perrecbench import BENCHMARK
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.stages import slot_requests
from tests.conftest import require_data

PROFILE = ("## User Profile\n{}\n\n", "## User Most Common Rating\n{:.1f}\n\n", "## User Average Rating\n{:.1f}\n")


def ref_history(item: dict, idx: int | None = None) -> str:
    text = "### Item Title\n{}\n".format(item["title"])
    if item.get("author"):
        text += "### Item Author\n{}\n".format(item["author"])
    who = "User" if idx is None else f"User{idx}"
    return text + "### {} Rating\n{}".format(who, float(item["rating"]))  # the reference's JSON ratings are floats


def ref_query(item: dict) -> str:
    text = "<|The Start of Query Item Information|>\n### Item Title\n{}\n".format(item["title"])
    if item.get("author"):
        text += "### Item Author\n{}\n".format(item["author"])
    return text + "<|The End of Query Item Information|>"


def ref_values(user: dict, profile: str, idx: int | None = None) -> list:
    return [profile, user["most_common_rating"], user["avg_rating"]] + [ref_history(i, idx) for i in user["retrieved"]]


def ref_point(code: Path, user: dict, profile: str, query: dict) -> str:
    template = (code / "templates_point/0ours/0ours0.txt").read_text()
    his = "<|The Start of User Data|>\n" + "".join(PROFILE) + "\n{}\n" * len(user["retrieved"])
    his += "<|The End of User Data|>\n"
    return template.format(his, "{}").format(*ref_values(user, profile), ref_query(query))


def ref_list(code: Path, users: list[dict], profiles: list[str], query: dict) -> str:
    template = (code / "templates_list/0ours/0ours0.txt").read_text()
    his, values = "", []
    for i, (user, profile) in enumerate(zip(users, profiles), start=1):
        his += f"<|The Start of User{i} Data|>\n" + "".join(PROFILE) + "\n{}\n" * len(user["retrieved"])
        his += f"<|The End of User{i} Data|>\n\n"
        values += ref_values(user, profile, i)
    return template.format(his, "{}").format(*values, ref_query(query))


def ref_pair(code: Path, a: dict, b: dict, pa: str, pb: str, query: dict) -> str:
    template = (code / "template_pair/0ours0.txt").read_text()

    def block(user: dict, profile: str) -> str:
        skeleton = "<|The Start of User Data|>\n" + "".join(PROFILE) + "\n{}\n\n" * len(user["retrieved"])
        return (skeleton + "<|The End of User Data|>\n").format(*ref_values(user, profile))

    return template.format(block(a, pa), block(b, pb), ref_query(query))


@pytest.fixture(scope="module")
def built():
    code = require_data("perrecbench", "code", "templates_point", "0ours", "0ours0.txt").parents[2]
    data_dir = require_data("ml-100k", "u.data").parents[1]
    cfg = PerRecBenchConfig(limit=9)  # default settings: the first 3 groups in point, pair and list mode
    samples = BENCHMARK.build_samples(cfg, data_dir)
    for s in samples:  # profiles stand in for the profile stage's answers (braces must survive)
        s["profiles"] = {u["key"]: f"Profile of {u['key']}: likes {{sci-fi}} and \"drama\"." for u in s["_users"]}
    return cfg, code, samples


def test_defaults_are_the_reference_settings(built):
    cfg, _, samples = built
    assert cfg.prompt.templates == "reference" and cfg.prompt.k == 4 and cfg.prompt.profile and not cfg.prompt.cot
    assert cfg.prompt.shots == 0 and {s["mode"] for s in samples} == {"point", "pair", "list"}


def test_default_prompts_equal_the_reference_construction(built):
    cfg, code, samples = built
    for s in samples:
        users, query, mode = s["_users"], s["_query"], s["mode"]
        profiles = [s["profiles"][u["key"]] for u in users]
        if mode == "point":
            tags = [f"u{i}" for i in range(len(users))]
            want = [ref_point(code, u, p, query) for u, p in zip(users, profiles)]
            sys_file = "templates_point/0ours/0ours0_sys.txt"
        elif mode == "list":
            tags, want = ["list"], [ref_list(code, users, profiles, query)]
            sys_file = "templates_list/0ours/0ours0_sys.txt"
        else:
            tags, want = ["0>1", "1>0"], [ref_pair(code, users[0], users[1], profiles[0], profiles[1], query),
                                          ref_pair(code, users[1], users[0], profiles[1], profiles[0], query)]
            sys_file = "template_pair/0ours0_sys.txt"
        for tag, expected in zip(tags, want):
            (req,) = slot_requests(cfg, s, tag)
            assert [m.role for m in req.messages] == ["system", "user"], s["sample_id"]
            assert req.messages[0].content == (code / sys_file).read_text(), (s["sample_id"], tag)
            assert req.messages[1].content == expected, (s["sample_id"], tag)
            # sent as the reference sends it: free text, temperature 0.1, 800 tokens (pair: 512)
            assert req.constraint is None and req.sampling.temperature == 0.1, (s["sample_id"], tag)
            assert req.sampling.max_tokens == (512 if mode == "pair" else 800), (s["sample_id"], tag)
