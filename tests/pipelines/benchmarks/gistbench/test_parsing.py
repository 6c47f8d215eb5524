"""Model text → answers: JSON recovery and repair, judge indices (incl. NONE), selections, taxonomy lines."""

from __future__ import annotations

import json

import pytest

from llmrec.pipelines.benchmarks.gistbench.parsing import (
    extract_json, merge_interests, parse_extraction, parse_indices, parse_selection, parse_taxonomy,
)

GOOD = [{"interest": "Jazz Piano", "item_ids": ["1", "2"]}]


@pytest.mark.parametrize("text", [
    json.dumps(GOOD),
    "```json\n" + json.dumps(GOOD) + "\n```",
    "Sure! Here are the interests:\n" + json.dumps(GOOD) + "\nHope this helps.",
    '[{"interest": "Jazz Piano", "item_ids": ["1", "2"],}]',           # trailing comma
    '[{"interest": "Jazz Piano", "item_ids": ["1", "2"',                # truncated (max_tokens)
    "[{'interest': 'Jazz Piano', 'item_ids': ['1', '2']}]",           # single quotes
    '{"interests": [{"interest": "Jazz Piano", "item_ids": ["1", "2"]}]}',
    '{"interest": "Jazz  Piano", "item_ids": [1, 2]}',                # one object, int ids, spaces
    '[{"interest": "Jazz Piano", "item_ids": "[1], [2]"}]',            # ids as text, copied brackets
])
def test_broken_extraction_outputs_are_repaired_by_the_lenient_parser(text):
    assert parse_extraction(text, "lenient") == GOOD


@pytest.mark.parametrize("text", [
    "", "not json at all", "The user likes jazz.", "42",
    "[204] implicit_positive - Back to the Future (1985)\n[96] implicit_positive - Terminator 2",  # echoed history
    '[ { "interest":"...", "item_ids": ["...", ...], "evidence_excerpt":"..." }, ...]',        # echoed example
])
def test_unparsable_extraction_is_none_for_the_lenient_parser(text):
    assert parse_extraction(text, "lenient") is None


def test_empty_list_is_a_valid_answer_and_junk_items_are_skipped():
    assert parse_extraction("[]", "lenient") == []
    assert parse_extraction('[{"interest": ""}, "x", 3, {"interest": "Chess", "item_ids": [{"a": 1}, "7"]}]',
                            "lenient") == [{"interest": "Chess", "item_ids": ["7"]}]


@pytest.mark.parametrize("text", [
    json.dumps(GOOD),
    "```json\n" + json.dumps(GOOD) + "\n```",
    "Sure! Here are the interests:\n" + json.dumps(GOOD) + "\nHope this helps.",
])
def test_reference_parser_reads_what_the_reference_reads(text):
    assert parse_extraction(text) == GOOD


@pytest.mark.parametrize("text,expected", [
    ('{"interests": [{"interest": "Jazz Piano", "item_ids": ["1", "2"]}]}', []),   # wrapper: no interests
    ('{"interest": "Jazz Piano", "item_ids": ["1", "2"]}', []),                   # bare object: none
    ('[{"interest": "Jazz Piano", "item_ids": [1, "2"]}]',                         # integer ids cite nothing
     [{"interest": "Jazz Piano", "item_ids": ["2"]}]),
    ('[{"interest": "Jazz  Piano", "item_ids": "1, 2"}]',                         # name verbatim, text ids lost
     [{"interest": "Jazz  Piano", "item_ids": []}]),
    ('[{"interest": "Jazz Piano", "item_ids": ["1", "2"],}]', None),               # no repair: unparsable
    ('[{"interest": "Jazz Piano", "item_ids": ["1", "2"', None),                   # truncated: unparsable
    ("The user likes jazz.", None),
    ("[]", []),
])
def test_reference_parser_loses_what_the_reference_loses(text, expected):
    assert parse_extraction(text) == expected


def test_extract_json_prefers_fenced_block():
    assert extract_json('noise [1] ```json\n{"a": 1}\n```') == {"a": 1}


def test_merge_interests_by_name_across_chunks():
    merged = merge_interests([
        [{"interest": "Jazz Piano", "item_ids": ["1", "2"]}, {"interest": "Hiking", "item_ids": ["5"]}],
        [{"interest": "Jazz Piano", "item_ids": ["2", "9"]}],
    ])
    assert merged == [{"interest": "Jazz Piano", "item_ids": ["1", "2", "9"]}, {"interest": "Hiking", "item_ids": ["5"]}]


@pytest.mark.parametrize("text,expected", [
    ("0, 2, 5", [0, 2, 5]),
    ("NONE", []),
    ("none of these items are relevant", []),
    ("Relevant: 1 and 3 (NONE else)", []),   # "NONE" anywhere wins, as in the reference
    ("NONEを購入", []),                         # seen from the embedded model
    ("NONEXISTENT 1", [1]),                   # but not inside a word
    ("2, 2, 9, 1", [2, 1]),                  # duplicates and out-of-range dropped
    ("I cannot tell.", None),
    ("17", None),
])
def test_judge_indices(text, expected):
    assert parse_indices(text, 6) == expected


def test_is_selection():
    assert parse_selection("item_3, ITEM 7, item_3, item_99", 10) == [3, 7]
    assert parse_selection("3, 7", 10) is None


def test_taxonomy_lines():
    text = "1: 146\n2 : 9999\n3:16\nfoo\n4: 5"
    assert parse_taxonomy(text, 3, {16, 146}) == {0: 146, 2: 16}
