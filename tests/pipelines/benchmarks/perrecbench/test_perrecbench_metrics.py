"""PTC as the reference computes it, ptc_rank, exact match, and the `llmrec score perrecbench` contract."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.perrecbench import BENCHMARK
from llmrec.pipelines.benchmarks.perrecbench.metrics import (aggregate_rows, ordering_from_values, ptc, ptc_rank, ranks_from_ordering,
                                           score_predictions)
from llmrec.pipelines.common.jsonio import read_predictions


def test_orderings_put_the_higher_index_first_among_ties():
    assert ordering_from_values([1.0, -0.5, 0.2]) == [1, 3, 2]
    assert ordering_from_values([0.0, 0.0, 1.0]) == [3, 2, 1]
    assert ordering_from_values([0.1] * 17) == list(range(17, 0, -1))  # stable beyond numpy's insertion-sort size


def test_two_users_all_taus_agree():
    assert ptc([1, 2], [1, 2]) == ptc_rank([1, 2], [1, 2]) == 1.0
    assert ptc([2, 1], [1, 2]) == ptc_rank([2, 1], [1, 2]) == -1.0


def test_ordering_tau_and_rank_tau_differ_from_three_users():
    # label: user1 > user3 > user2; prediction: user2 > user3 > user1 (the exact reverse)
    assert ptc([2, 3, 1], [1, 3, 2]) == pytest.approx(1 / 3)  # positions (0,2) discordant only
    assert ptc_rank([2, 3, 1], [1, 3, 2]) == pytest.approx(-1.0)  # rank vectors [3,1,2] vs [1,3,2]


def test_duplicate_list_answer_ties_and_absent_users():
    assert ranks_from_ordering([3, 1, 1], 3) == [2, 4, 1]  # user 2 absent: rank n+1
    assert ptc([3, 1, 1], [3, 2, 1]) == pytest.approx(2 / math.sqrt(6))  # tau-b tie correction
    assert ptc_rank([3, 1, 1], [3, 2, 1]) == pytest.approx(1 / 3)


LINES = [
    # point, usable: scores 5-3=2, 2-4=-2 -> [1, 2] = label; errors +1, -1
    {"group_id": "g1", "mode": "point", "relative_ratings": [1.0, -1.0], "avg_ratings": [3.0, 4.0],
     "ratings": [4.0, 3.0], "prediction": [5, 2]},
    # point with a null: unusable for ptc, but its other users count for MAE/RMSE (errors -2, +1)
    {"group_id": "g2", "mode": "point", "relative_ratings": [0.0, 1.0, -1.0], "avg_ratings": [4.0, 3.0, 2.0],
     "ratings": [4.0, 4.0, 1.0], "prediction": [2, None, 2]},
    # pair: label [1, 3, 2], prediction its exact reverse [2, 3, 1]
    {"group_id": "g3", "mode": "pair", "relative_ratings": [1.0, -0.5, 0.2], "avg_ratings": [3.0, 3.0, 3.0],
     "prediction": [2, 3, 1]},
    {"group_id": "g4", "mode": "list", "relative_ratings": [1.0, -0.5, 0.2], "avg_ratings": [3.0, 3.0, 3.0],
     "prediction": None},
    # list with a tied label (ordering [3, 2, 1]) and a duplicate answer
    {"group_id": "g5", "mode": "list", "relative_ratings": [0.0, 0.0, 1.0], "avg_ratings": [3.0, 3.0, 3.0],
     "prediction": [3, 1, 1]},
]
T = 2 / math.sqrt(6)


def expected_metrics() -> dict:
    return {
        "ptc": (1 + 1 / 3 + T) / 3, "ptc_rank": (1 - 1 + 1 / 3) / 3, "exact_match": 1 / 3, "missed": 2,
        "ptc_point": 1.0, "ptc_rank_point": 1.0, "exact_match_point": 1.0, "missed_point": 1,
        "ptc_pair": 1 / 3, "ptc_rank_pair": -1.0, "exact_match_pair": 0.0, "missed_pair": 0,
        "ptc_list": T, "ptc_rank_list": 1 / 3, "exact_match_list": 0.0, "missed_list": 1,
        "mae": 5 / 4, "rmse": math.sqrt(7 / 4),
        # g5's list names user 1 twice: the one usable line whose prediction has ties
        "n_tied": 1, "tied_share": 1 / 3, "n_tied_point": 0, "tied_share_point": 0.0, "n_tied_pair": 0,
        "tied_share_pair": 0.0, "n_tied_list": 1, "tied_share_list": 1.0,
    }


def write(tmp_path, lines) -> str:
    path = tmp_path / "P.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_score_contract_on_a_hand_written_file(tmp_path):
    task = BENCHMARK.score_tasks[0]
    lines = read_predictions(write(tmp_path, LINES), task.line)
    got = task.run(lines, {})
    want = expected_metrics()
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key


def test_score_cli_writes_the_metrics_file(tmp_path):
    from llmrec.cli import app

    out = tmp_path / "M.json"
    res = CliRunner().invoke(app, ["score", "perrecbench", "--predictions", str(write(tmp_path, LINES)),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    metrics = json.loads(out.read_text())["metrics"]
    assert metrics["ptc"] == pytest.approx(expected_metrics()["ptc"]) and metrics["missed"] == 2


def test_only_present_modes_and_no_rating_metrics_without_ratings():
    got = score_predictions([dict(LINES[2]), dict(LINES[3])])
    assert set(got) == {"ptc", "ptc_rank", "exact_match", "missed", "n_tied", "tied_share", "ptc_pair",
                        "ptc_rank_pair", "exact_match_pair", "missed_pair", "n_tied_pair", "tied_share_pair",
                        "ptc_list", "ptc_rank_list", "exact_match_list", "missed_list", "n_tied_list",
                        "tied_share_list"}
    assert got["ptc_list"] is None and got["missed_list"] == 1  # no usable list line: undefined, not 0


@pytest.mark.parametrize("bad,match", [
    ({"prediction": [1, 2]}, "list of 3"),
    ({"prediction": [1, 2, 4]}, "indices 1..3"),
    ({"mode": "group"}, "mode must be"),
    ({"avg_ratings": [3.0]}, "same 2"),
])
def test_malformed_lines_name_the_line(bad, match):
    with pytest.raises(DataError, match=match):
        score_predictions([dict(LINES[0]), {**LINES[2], **bad}])


def test_aggregate_cells_average_and_baselines():
    rows = [dict(line, level="easy", status="ok", item_avg_ratings=[3.5] * len(line["relative_ratings"]))
            for line in LINES]
    rows.append({"status": "failed", "level": "easy", "mode": "point"})
    m = aggregate_rows(rows, ["easy"])
    assert m["failed"] == 1 and m["n_answered"] == 5
    assert m["ptc.easy.point"] == 1.0 and m["ptc.easy.pair"] == pytest.approx(1 / 3)
    assert m["ptc.avg"] == pytest.approx((1 + 1 / 3 + T) / 3)
    # baselines on the same four users: user averages 3, 4, 4, 2 vs ratings 4, 3, 4, 1
    assert m["mae_user_avg"] == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert m["mae_item_avg"] == pytest.approx((0.5 + 0.5 + 0.5 + 2.5) / 4)


def test_user_and_item_average_baselines_score_one_point_line_per_group():
    """The suite's baselines: one point line per group (every mode's sample of a group is the same group), predicting
    the user's average rating (all point scores 0) or the item's average among the other raters."""
    from llmrec.pipelines.benchmarks.perrecbench import BENCHMARK
    from llmrec.pipelines.registry import benchmark_config

    cfg = benchmark_config({"name": "perrecbench", "levels": ["easy"]})
    group = {"group_id": "g1", "level": "easy", "relative_ratings": [1.0, -1.0], "avg_ratings": [3.0, 4.0],
             "ratings": [4.0, 3.0], "item_avg_ratings": [3.5, 3.0], "prediction": None, "_users": ["transient"]}
    samples = [dict(group, sample_id=f"g1/{m}", mode=m) for m in ("point", "pair", "list")]
    out = BENCHMARK.baselines(cfg, samples, None)
    assert set(out) == {"user_avg", "item_avg"}
    [user], [item] = out["user_avg"], out["item_avg"]
    assert user["sample_id"] == item["sample_id"] == "g1/point" and "_users" not in user
    assert user["prediction"] == [3.0, 4.0] and item["prediction"] == [3.5, 3.0]
    # item_avg: scores 3.5-3 = 0.5 and 3-4 = -1 order user 1 first, as the labels do; user_avg: all ties
    assert item["exact_match"] == 1.0 and user["exact_match"] == 0.0
    metrics = BENCHMARK.aggregate(cfg, out["user_avg"], None)
    assert metrics["mae"] == pytest.approx(1.0) == metrics["mae_user_avg"]
