"""`llmrec score gistbench` on a hand-written predictions file (issue 6 contract)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.runner.scoring import score_file

EP, IP, IN = "explicit_positive", "implicit_positive", "implicit_negative"


def ev(*pairs):
    return [{"object_id": o, "engagement_type": t} for o, t in pairs]


LINES = [
    # model A, user 1: guitar + piano (category 146, both verified), hiking (133, hybrid), bogus (110, not verified)
    {"model": "A", "user_id": "1", "interest": "Guitar", "category_id": 146, "dataset": "synthetic",
     "evidence": ev(("1", EP), ("2", EP)), "correct": 4, "backing": 5},
    {"model": "A", "user_id": "1", "interest": "Piano", "category_id": 146, "dataset": "synthetic",
     "evidence": ev(("2", EP), ("3", EP), ("7", IN)), "correct": 3, "backing": 5},
    {"model": "A", "user_id": "1", "interest": "Hiking", "category_id": 133, "dataset": "synthetic",
     "evidence": ev(("4", EP), ("6", IP), ("10", IP)), "correct": 5, "backing": 5},
    {"model": "A", "user_id": "1", "interest": "Bogus", "category_id": 110, "dataset": "synthetic",
     "evidence": ev(("8", IP)), "correct": 0, "backing": 0},
    # model A, user 2: nothing verified
    {"model": "A", "user_id": "2", "interest": "Sports", "category_id": 0, "dataset": "synthetic",
     "evidence": ev(("15", IN), ("14", IP)), "correct": 1, "backing": 2},
    # model B adds a verified category for user 1 and verifies user 2's category 16
    {"model": "B", "user_id": "1", "interest": "Running", "category_id": 243, "dataset": "synthetic",
     "evidence": ev(("10", IP), ("6", IP), ("4", EP)), "correct": 0, "backing": 0, "extra": "ignored"},
    {"model": "B", "user_id": "2", "interest": "AI", "category_id": 16, "dataset": "synthetic",
     "evidence": ev(("11", EP), ("12", EP)), "correct": 2, "backing": 2},
    {"model": "B", "user_id": "3", "interest": "", "category_id": 0, "dataset": "synthetic",
     "evidence": [], "correct": 0, "backing": 0},
]


def write(tmp_path, lines, name="p.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def hm(a, b):
    return 2 * a * b / (a + b) if a + b else 0.0


def test_union_oracle_over_all_models(tmp_path):
    out = score_file("gistbench", write(tmp_path, LINES), {"model": "A", "oracle": None})
    m = out["metrics"]
    # user 1: categories {146: G=1, 133: G=1, 110: G=0}; union oracle {146, 133, 243} = 3
    p1, r1 = 2 / 3, 2 / 3
    is1 = ((0.8 + 0.6) / 2 + 1.0) / 2
    # user 2: {0: G=0}; oracle {16} → all zero
    assert m["ig_p_mean"] == pytest.approx(p1 / 2) and m["ig_r_mean"] == pytest.approx(r1 / 2)
    assert m["ig_f1_mean"] == pytest.approx(hm(p1, r1) / 2) and m["ig_f1_median"] == pytest.approx(hm(p1, r1) / 2)
    assert m["is_mean"] == pytest.approx(is1 / 2) and m["is_median"] == pytest.approx(is1 / 2)
    assert m["hm_mean"] == pytest.approx(hm(hm(p1, r1), is1) / 2)
    for key in ("ig_p", "ig_r", "ig_f1", "is", "hm"):
        assert f"{key}_mean" in m and f"{key}_median" in m
    assert m["n_users"] == 2 and m["n_models"] == 2


def test_supplied_oracle_and_model_b(tmp_path):
    oracle = tmp_path / "o.json"
    oracle.write_text(json.dumps({"dataset": "synthetic", "oracle": {"1": [146, 243], "2": [16, 31], "3": [86]}}))
    m = score_file("gistbench", write(tmp_path, LINES), {"model": "B", "oracle": str(oracle)})["metrics"]
    # B user 1: {243: G=1} → P=1, R=1/2; user 2: {16: G=1} → P=1, R=1/2; user 3: no interests → 0
    assert m["ig_r_mean"] == pytest.approx((0.5 + 0.5 + 0) / 3)
    assert m["is_mean"] == pytest.approx((0 + 1 + 0) / 3)
    assert m["n_users"] == 3


def test_cli_writes_metrics(tmp_path):
    from llmrec.cli import app

    out = tmp_path / "m.json"
    res = CliRunner().invoke(app, ["score", "gistbench", "--predictions", str(write(tmp_path, LINES)),
                                   "--model", "A", "--out", str(out)])
    assert res.exit_code == 0, res.output
    metrics = json.loads(out.read_text())["metrics"]
    assert metrics["ig_f1_mean"] == pytest.approx(hm(2 / 3, 2 / 3) / 2)


def test_contract_errors(tmp_path):
    with pytest.raises(ConfigError, match="several models"):
        score_file("gistbench", write(tmp_path, LINES), {"model": None})
    with pytest.raises(ConfigError, match="Available: A, B"):
        score_file("gistbench", write(tmp_path, LINES), {"model": "C"})
    bad = [{k: v for k, v in LINES[0].items() if k != "evidence"}]
    with pytest.raises(DataError, match="line 1 lacks required key"):
        score_file("gistbench", write(tmp_path, bad), {"model": "A"})
    with pytest.raises(DataError, match="no known signal flags"):
        score_file("gistbench", write(tmp_path, [{**LINES[0], "dataset": "netflix"}]), {"model": "A"})
    with pytest.raises(DataError, match="line 1: 'category_id': Input should be a valid integer"):
        score_file("gistbench", write(tmp_path, [{**LINES[0], "category_id": "146"}]), {"model": "A"})
    with pytest.raises(DataError, match="engagement_type"):
        score_file("gistbench", write(tmp_path, [{**LINES[0], "evidence": ev(("1", "like"))}]), {"model": "A"})
    oracle = tmp_path / "o.json"
    oracle.write_text(json.dumps({"dataset": "mind", "oracle": {"1": [1]}}))
    with pytest.raises(DataError, match="is for dataset 'mind'"):
        score_file("gistbench", write(tmp_path, LINES), {"model": "A", "oracle": str(oracle)})
