"""Answer parsing as the reference does it, checked against the reference's own output files."""

from __future__ import annotations

import json

import pytest

from llmrec.pipelines.benchmarks.perrecbench.parsing import (MISSED, check_format, extract_braced, majority_vote, parse_list,
                                           parse_pair, parse_point, parse_reference_value)
from tests.conftest import require_data

RUN = "abs_rating/deepseek-chat/0shot/all/exp0-profile/k4"
LEVELS = ("easy", "medium", "hard")


def test_last_brace_span_without_nested_close():
    assert extract_braced('x {"a": 1} then {"predicted_rating": 4}') == '{"predicted_rating": 4}'
    assert extract_braced('{"a": {"b": 1}}') == '{"a": {"b": 1}'  # may hold '{', never '}'
    assert extract_braced("no json") is None and extract_braced(None) is None


@pytest.mark.parametrize("text,value", [
    ('{"predicted_rating": 4}', 4),
    ('{"predicted_rating": 3.5}', 3.5),
    ('Sure!\n```json\n{\n  "Predicted_Score": 2\n}\n```', 2),
    ('{"predicted_rating": 4, "rating_confidence": 0.2}', 0.2),  # the LAST key containing rating/score
    ('{"predicted_rating": "4"}', None),
    ('{"predicted_rating": true}', None),
    ('{"predicted_rating": NaN}', None),
    ('{"stars": 4}', None),
    ('{"predicted_rating": 4', None),
    ("", None),
])
def test_point(text, value):
    got = parse_point(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text,n,value", [
    ('{"predicted_ranking": [2, 1, 3]}', 3, [2, 1, 3]),
    ('{"predicted_ranking": [1, 3, 3]}', 3, [1, 3, 3]),  # duplicates pass check_format
    ('{"predicted_ranking": [1.0, 2.0]}', 2, [1, 2]),
    ('{"predicted_ranking": [2, 3]}', 2, None),  # min must be 1
    ('{"predicted_ranking": [1, 2]}', 3, None),  # length
    ('{"predicted_ranking": []}', 0, None),
    ('{"predicted_ranking": ["1", "2"]}', 2, None),
    ('{"ranking": [1, 2]}', 2, None),  # check_format needs predicted_ranking
    ('{"predicted_ranking": [1, 2], "rank_note": "x"}', 2, None),  # the last "rank" key is not a ranking
    ('{"predicted_ranking": [1, 1.5, 3]}', 3, None),
])
def test_list(text, n, value):
    assert parse_list(text, n) == value


def test_check_format_is_the_reference_rule():
    assert check_format({"predicted_ranking": [1, 3, 3]}, 3)
    assert not check_format({"predicted_ranking": [1, 2, 2]}, 3)  # max != len
    assert not check_format({"reason": "x"}, 2)


@pytest.mark.parametrize("text,value", [
    ("[User A]", "[user a]"), ("  [USER B]\n", "[user b]"), ("User B", "user b"),
    ("The answer is [User A].", "[user a]"),
    ("[User A] or [User B]", None),  # the greedy bracket span swallows both
    ("I prefer user A", None), ("", None), (None, None),
])
def test_pair(text, value):
    assert parse_pair(text) == value


def test_majority_vote_keeps_the_first_seen_among_ties():
    assert majority_vote(["b", "a", "a", "b", "c"]) == "b"
    assert majority_vote(["x", "y", "y"]) == "y"
    assert majority_vote([]) is None


def _files(level: str, mode: str):
    out = require_data("perrecbench", "code", f"result-{level}", *RUN.split("/"), f"processed-{mode}", "output")
    return json.loads((out / "0_original-sc1.json").read_text()), json.loads((out / "0-sc1.json").read_text())


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mode", ["point", "group", "pair"])
def test_reference_raw_outputs_parse_to_the_reference_parsed_file(level, mode):
    """Every answer dict of ``0_original-sc1.json``, as JSON text through our parser, gives the
    reference's ``0-sc1.json`` exactly (values and int/float types)."""
    original, parsed = _files(level, mode)
    ours = {}
    for key, groups in original.items():
        ours[key] = []
        for group in groups:
            n = len(group) if mode == "point" else len(next(iter(group[0].values())))
            ours[key].append([parse_reference_value(obj, "point" if mode == "point" else "list", n)
                              for obj in group])
    assert list(ours) == list(parsed) and len(ours) == 200
    assert json.dumps(ours) == json.dumps(parsed)
    assert MISSED not in json.dumps(ours)
