"""Loaders and mappers to the unified schema; numeric time order; chunks; user selection."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.gistbench import schema as S
from llmrec.pipelines.benchmarks.gistbench.history import chunk_history, select_users, user_histories
from llmrec.pipelines.benchmarks.gistbench.mappers import load_published, map_play_counts, map_star_ratings, parse_timestamps
from tests.conftest import require_data

ROWS = [
    {"user_id": "u1", "object_id": "a", "object_text": "A", "interaction_type": "explicit_positive", "interaction_time": "9"},
    {"user_id": "u1", "object_id": "b", "object_text": "B", "interaction_type": "implicit_positive", "interaction_time": "10"},
    {"user_id": "u1", "object_id": "c", "object_text": "C", "interaction_type": "implicit_negative", "interaction_time": "100"},
    {"user_id": "u2", "object_id": "d", "object_text": "D", "interaction_type": "explicit_negative", "interaction_time": ""},
]


def _write(tmp_path, fmt: str):
    p = tmp_path / f"e.{fmt}"
    df = pd.DataFrame(ROWS)
    if fmt == "csv":
        df.to_csv(p, index=False)
    elif fmt == "parquet":
        df.to_parquet(p, index=False)
    elif fmt == "json":
        p.write_text(json.dumps(ROWS))
    else:
        p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return p


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json", "jsonl"])
def test_published_columns_and_numeric_time_order(tmp_path, fmt):
    frame = load_published(_write(tmp_path, fmt), "custom")
    assert list(frame.columns) == list(S.COLUMNS)
    hist = user_histories(frame, ["u1", "u2"])
    assert [e["object_id"] for e in hist["u1"]] == ["c", "b", "a"]  # 100 > 10 > 9, not "9" > "10" > "100"
    assert hist["u2"][0]["engagement_type"] == S.EXP_NEG


def test_bad_published_rows_name_the_record(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(ROWS[:1] + [{**ROWS[1], "interaction_type": "like"}]))
    with pytest.raises(DataError, match="record 1: interaction_type"):
        load_published(p, "custom")
    p.write_text(json.dumps([{k: v for k, v in ROWS[0].items() if k != "object_text"}]))
    with pytest.raises(DataError, match="missing column"):
        load_published(p, "custom")
    with pytest.raises(DataError, match="not found"):
        load_published(tmp_path / "nope.csv", "custom")


def test_timestamps_numbers_and_dates():
    out = parse_timestamps(pd.Series(["10", "9.5", "2024-01-01T00:00:00Z", "", None]))
    assert out[0] == 10 and out[1] == 9.5 and out[2] == pytest.approx(1704067200)
    assert out[3:].isna().all()


def test_chunks_and_history_cap():
    hist = [{"object_id": str(i), "engagement_type": S.IMP_POS, "object_text": ""} for i in range(250)]
    chunks = chunk_history(hist, 100)
    assert [len(c) for c in chunks] == [100, 100, 50] and chunks[0][0]["object_id"] == "0"
    frame = pd.DataFrame({S.DATASET: "x", S.USER_ID: "u", S.OBJECT_ID: [str(i) for i in range(30)],
                          S.ENGAGEMENT_TYPE: S.IMP_POS, S.OBJECT_TEXT: "", S.TIMESTAMP: [float(i) for i in range(30)]})
    capped = user_histories(frame, ["u"], max_history=5)["u"]
    assert [e["object_id"] for e in capped] == ["29", "28", "27", "26", "25"]


def test_user_selection_is_stable():
    users = [str(i) for i in range(100)]
    assert select_users(users, 10) == select_users(list(reversed(users)), 10)
    assert len(select_users(users, None)) == 100


def test_star_ratings_mapping():
    inter = pd.DataFrame({"user_id": ["1"] * 6, "item_id": ["i1", "i2", "i3", "i4", "i5", "i6"],
                          "rating": [5, 4, 3, 2, 1, 4.5], "timestamp": [1, 2, 3, 4, 5, 6]})
    items = pd.DataFrame({"item_id": ["i1", "i2"], "title": ["Heat (1995)", "Up"], "genres": [["Action", "Crime"], ""]})
    out = map_star_ratings(inter, items, "ml-100k")
    assert list(out[S.ENGAGEMENT_TYPE]) == [S.EXP_POS, S.IMP_POS, S.IMP_POS, S.EXP_NEG, S.EXP_NEG, S.IMP_POS]
    assert out[S.OBJECT_TEXT].iloc[0] == "Heat (1995) | Action, Crime" and out[S.OBJECT_TEXT].iloc[1] == "Up"
    assert out[S.OBJECT_TEXT].iloc[2] == "item i3"


def test_play_counts_per_user_quantiles():
    inter = pd.DataFrame({"user_id": ["a"] * 5 + ["b"],
                          "item_id": ["x1", "x2", "x3", "x4", "x5", "y"],
                          "rating": [1, 50, 20, 300, 20, 7], "timestamp": pd.array([pd.NA] * 6, dtype="Int64")})
    out = map_play_counts(inter, None, "lastfm", 0.2, 0.8)
    a = out[out[S.USER_ID] == "a"]
    # ranks: 300 → 1.0 (exp+), 50 → 0.8 (imp+), 20/20 → 0.5 (imp+), 1 → 0.2 (imp−); most played first
    assert list(a[S.OBJECT_ID]) == ["x4", "x2", "x3", "x5", "x1"]
    assert list(a[S.ENGAGEMENT_TYPE]) == [S.EXP_POS, S.IMP_POS, S.IMP_POS, S.IMP_POS, S.IMP_NEG]
    assert out[out[S.USER_ID] == "b"][S.ENGAGEMENT_TYPE].item() == S.EXP_POS  # a single artist
    assert [e["object_id"] for e in user_histories(out, ["a"])["a"]] == ["x4", "x2", "x3", "x5", "x1"]


def test_bundled_mock_set():
    frame = load_published(require_data("gistbench/gistbench/assets/mock_dataset.json"), "synthetic")
    assert len(frame) == 25 and frame[S.USER_ID].nunique() == 3
    assert set(frame[S.ENGAGEMENT_TYPE]) == {S.EXP_POS, S.IMP_POS, S.IMP_NEG}
    assert S.detect_signals(frame[S.ENGAGEMENT_TYPE]) == S.DATASETS["synthetic"].signals
