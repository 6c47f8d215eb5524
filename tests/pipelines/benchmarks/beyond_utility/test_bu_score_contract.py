"""`llmrec score beyond-utility`: the file contract end to end through the CLI, and its errors."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from llmrec.cli import app
from llmrec.pipelines.runner.scoring import score_file

runner = CliRunner()

ITEMS = [{"item_id": 1, "train_freq": 10, "categories": ["A", "B"]}, {"item_id": 2, "train_freq": 5, "categories": ["A"]},
         {"item_id": 3, "train_freq": 3, "categories": ["C"]}, {"item_id": 4, "train_freq": 1, "categories": []},
         {"item_id": 6, "train_freq": 2, "categories": ["B"]}, {"n_users": 20}]
PREDS = [{"user_id": "u1", "target": 1, "candidates": [1, 2, 3], "ranked": [2, 1, 0], "history_len": 5},
         {"user_id": "u2", "target": 3, "candidates": [3, 4, 5], "ranked": [4, 5, 6], "history_len": 1},
         {"user_id": "u3", "target": 4, "candidates": [4, 6, 2, 1], "ranked": [4, 0, 0], "history_len": 3}]


def _write(path, lines, raw_extra=""):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + raw_extra)
    return path


def test_cli_writes_metrics_with_nan_strings(tmp_path):
    p, i, out = _write(tmp_path / "p.jsonl", PREDS), _write(tmp_path / "i.jsonl", ITEMS), tmp_path / "m.json"
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(i), "--k", "2",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    m = json.loads(out.read_text())["metrics"]
    assert m["popreo"] == "NaN"  # an empty popularity bin (the exact string, JSON stays strict)
    assert m["hr"] == pytest.approx(2 / 3) and m["hallucination"] == pytest.approx(1 / 3)
    assert m["jaccard"] == pytest.approx(1 / 3) and m["item_coverage"] == pytest.approx(5 / 6)
    assert set(m) == {"hr", "ndcg", "aplt", "arp", "popreo", "serendipity", "self_information", "gini", "dpd",
                       "jain", "item_coverage", "shannon", "jaccard", "hallucination"}


def test_median_from_items_file_and_option_pairs(tmp_path):
    items = ITEMS[:-1] + [{"n_users": 20, "history_len_median": 5}]
    p, i = _write(tmp_path / "p.jsonl", PREDS), _write(tmp_path / "i.jsonl", items)
    m = score_file("beyond-utility", p, {"items": str(i), "k": "2"})["metrics"]
    assert m["dpd"] == "NaN"  # nobody has history_len > 5
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--option", f"items={i}",
                              "--option", "k=2"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["metrics"]["dpd"] == "NaN"


@pytest.mark.parametrize("line, message", [
    ({"user_id": 1, "target": 1, "candidates": [1], "ranked": [1, 2], "history_len": 1},
     "'user_id': Input should be a valid string"),
    ({"user_id": "a", "target": "1", "candidates": [1], "ranked": [1, 2], "history_len": 1}, "'target'"),
    ({"user_id": "a", "target": 1, "candidates": [1], "ranked": [1, "x"], "history_len": 1}, "'ranked'"),
    ({"user_id": "a", "target": 1, "candidates": [1], "ranked": [1, 2, 3], "history_len": 1}, "same length"),
    ({"user_id": "a", "target": 1, "candidates": [1], "ranked": [1, 2], "history_len": -1}, "'history_len'"),
    ({"user_id": "a", "target": 1, "candidates": [1], "ranked": [1, 2]}, "lacks required key"),
    ({"user_id": "z", "target": 1, "candidates": [1], "ranked": [1, 2], "history_len": 1}, "already on line 1"),
])
def test_bad_prediction_lines_name_file_and_line(tmp_path, line, message):
    good = {"user_id": "z", "target": 1, "candidates": [1], "ranked": [1, 2], "history_len": 1}
    p = _write(tmp_path / "p.jsonl", [good, line])
    i = _write(tmp_path / "i.jsonl", ITEMS)
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(i), "--k", "2"])
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "line 2" in text and message in text and "p.jsonl" in text


def test_ranked_shorter_than_k_and_bad_json(tmp_path):
    i = _write(tmp_path / "i.jsonl", ITEMS)
    p = _write(tmp_path / "p.jsonl", PREDS)
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(i), "--k", "4"])
    assert res.exit_code == 2 and "fewer than k=4" in " ".join(res.output.split())
    p = _write(tmp_path / "p.jsonl", PREDS, raw_extra="{not json\n")
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(i), "--k", "2"])
    assert res.exit_code == 2 and "line 4 is not valid JSON" in " ".join(res.output.split())


@pytest.mark.parametrize("items, message", [
    (ITEMS[:-1], "no line with 'n_users'"),
    (ITEMS + [{"n_users": 3}], "a second n_users line"),
    (ITEMS[:1] + [{"item_id": 1, "train_freq": 2}, {"n_users": 3}], "listed twice"),
    ([{"item_id": 0, "train_freq": 0, "categories": ["A"]}, {"n_users": 3}], "cannot have categories"),
    ([{"item_id": 2, "train_freq": -1}, {"n_users": 3}], "'train_freq'"),
])
def test_bad_items_lines(tmp_path, items, message):
    p, i = _write(tmp_path / "p.jsonl", PREDS), _write(tmp_path / "i.jsonl", items)
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(i), "--k", "2"])
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output
    assert "i.jsonl" in " ".join(res.output.split())


def test_missing_items_or_k_and_undeclared_options(tmp_path):
    p = _write(tmp_path / "p.jsonl", PREDS)
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--k", "2"])
    assert res.exit_code == 2 and "--items" in res.output
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(p)])
    assert res.exit_code == 2 and "--k" in res.output
    mcq = _write(tmp_path / "mcq.jsonl", [{"sample_id": "a", "gold": "A", "output": "A"}])
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(mcq), "--k", "2"])
    assert res.exit_code == 2 and "takes no option" in " ".join(res.output.split())
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(mcq), "--option", "oops"])
    assert res.exit_code == 2 and "key=value" in res.output


def test_base_candidates_default_and_target_added(tmp_path):
    lines = [dict(PREDS[0], base_candidates=[2, 3]), PREDS[1], PREDS[2]]  # the target 1 is added to B_u
    a = score_file("beyond-utility", _write(tmp_path / "a.jsonl", lines), {"items": str(_write(tmp_path / "i.jsonl", ITEMS)), "k": 2})
    b = score_file("beyond-utility", _write(tmp_path / "b.jsonl", PREDS), {"items": str(tmp_path / "i.jsonl"), "k": 2})
    assert a["metrics"] == b["metrics"]
    assert not any(isinstance(v, float) and math.isnan(v) for v in a["metrics"].values())
