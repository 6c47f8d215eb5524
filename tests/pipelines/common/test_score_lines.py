"""`llmrec score`: every task reads its file through one reader (common.jsonio.read_predictions)
against its line schema, so all tasks refuse the same things, naming the file and the line."""

from __future__ import annotations

import json

import pytest

from llmrec.errors import DataError
from llmrec.pipelines.runner.scoring import score_file

MCQ = {"sample_id": "a", "gold": "A", "output": "<choice>A</choice>", "turns": 2}
GEN = {"sample_id": "a", "acknowledge": "yes", "violate": "no", "hallucinate": "no", "helpful": "yes"}
PERREC = {"group_id": "g1", "mode": "point", "relative_ratings": [1.0, -1.0], "avg_ratings": [3.0, 4.0],
          "prediction": [5, 2]}
LRWORLD = {"sample_id": "m#0|base|r0", "measure": "m", "factor": "f", "gold": "B", "options": ["x", "y", "z", "w"],
           "output": "B", "parsed": "B"}
GIST = {"model": "A", "user_id": "1", "interest": "Guitar", "category_id": 146, "dataset": "synthetic",
        "evidence": [{"object_id": "1", "engagement_type": "explicit_positive"}], "correct": 1, "backing": 1}
BU = {"user_id": "u1", "target": 1, "candidates": [1, 2], "ranked": [2, 1], "history_len": 3}
TASKS = {"prefeval-mcq": MCQ, "prefeval-gen": GEN, "perrecbench": PERREC, "lrworld": LRWORLD, "gistbench": GIST,
         "beyond-utility": BU}


def _write(tmp_path, lines, name="p.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(x, allow_nan=True) + "\n" for x in lines))
    return p


def _options(task, tmp_path):
    if task != "beyond-utility":
        return {}
    return {"items": str(_write(tmp_path, [{"item_id": 1, "train_freq": 2}, {"n_users": 5}], "i.jsonl")), "k": 1}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_good_line_scores_and_a_repeated_one_is_refused(task, tmp_path):
    line = TASKS[task]
    assert score_file(task, _write(tmp_path, [line]), _options(task, tmp_path))["n_lines"] == 1
    if task == "gistbench":  # one line per interest: its own check compares names with spacing normalized
        return
    p = _write(tmp_path, [line, dict(line)])
    with pytest.raises(DataError, match=rf"{p}: line 2: .* already on line 1"):
        score_file(task, p, _options(task, tmp_path))


@pytest.mark.parametrize("task, change, message", [
    ("prefeval-mcq", {"gold": 5}, "line 1: 'gold': Input should be 'A', 'B', 'C' or 'D' (got 5)"),
    ("prefeval-mcq", {"gold": "E"}, "'gold': Input should be 'A', 'B', 'C' or 'D'"),
    ("prefeval-mcq", {"turns": "2"}, "'turns': Input should be a valid integer (got '2')"),
    ("prefeval-gen", {"helpful": 1}, "'helpful': Input should be a valid string (got 1)"),
    ("perrecbench", {"avg_ratings": [3.0, float("nan")]}, "'avg_ratings'[1]: Input should be a finite number"),
    ("perrecbench", {"prediction": [float("inf"), 2]}, "'prediction'[0]: Input should be a finite number"),
    ("perrecbench", {"relative_ratings": [1.0, "x"]}, "'relative_ratings'[1]: Input should be a valid number"),
    ("perrecbench", {"mode": "group"}, "'mode': Input should be 'point', 'pair' or 'list'"),
    ("lrworld", {"gold": "5"}, "'gold' must be one of the 4 option labels ['A', 'B', 'C', 'D'], got '5'"),
    ("lrworld", {"run": True}, "'run': Input should be a valid integer (got True)"),
    ("gistbench", {"user_id": 1.5}, "'user_id': an id must be a string or an integer (got 1.5)"),
    ("gistbench", {"correct": 2}, "correct (2) exceeds backing (1)"),
    ("beyond-utility", {"base_candidates": None}, "'base_candidates': Input should be a valid list"),
])
def test_bad_values_name_file_line_and_key(task, change, message, tmp_path):
    p = _write(tmp_path, [{**TASKS[task], **change}])
    with pytest.raises(DataError) as e:
        score_file(task, p, _options(task, tmp_path))
    assert str(e.value).startswith(f"{p}: line 1") and message in str(e.value)
