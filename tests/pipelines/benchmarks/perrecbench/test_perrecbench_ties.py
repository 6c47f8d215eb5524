"""Ties in PerRecBench predictions: counted in every run (n_tied / tied_share), scored as the reference does by
default (broken by position), and as expected values over every tie-break with ``ties: aware``."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from typer.testing import CliRunner

from llmrec.pipelines.benchmarks.perrecbench import BENCHMARK
from llmrec.pipelines.benchmarks.perrecbench.metrics import (aggregate_rows, aware_scores, ordering_from_values,
                                                             prediction_tiers, ptc, ptc_rank, score_line)
from llmrec.pipelines.protocol import protocol_record
from llmrec.pipelines.registry import benchmark_config


def _cfg(**kw):
    return benchmark_config({"name": "perrecbench", "levels": ["easy"], **kw})


def constant_pair_groups(n_groups: int = 20, first_better: int = 11) -> list[dict]:
    """Pair-mode samples of a subject that answers "[User A]" to every prompt: it prefers neither user of any
    pair. ``first_better`` groups have user 1 ahead in the label, the others user 2."""
    out = []
    for g in range(n_groups):
        rel = [1.0, -1.0] if g < first_better else [-1.0, 1.0]
        answers = {key: {"state": "ok", "answer": "[user a]", "attempts": 1, "texts": ["[User A]"]}
                   for key in ("0>1", "1>0")}
        out.append({"sample_id": f"g{g}/pair", "group_id": f"g{g}", "item_id": f"i{g}", "level": "easy",
                    "mode": "pair", "size": 2, "relative_ratings": rel, "avg_ratings": [3.0, 3.0],
                    "answers": answers, "status": "ok"})
    return out


def scored(cfg, samples):
    return [dict(s, **BENCHMARK.score(cfg, s)) for s in samples]


def test_constant_predictor_every_group_tied_reference_scores_the_tie_break():
    cfg = _cfg()
    rows = scored(cfg, constant_pair_groups())
    assert all(r["ties"] and r["tied_pairs"] == [[1, 2]] for r in rows)
    # the reference: the heapsort's order puts user 1 first in every group, so ptc is +1 or -1 by the label alone
    assert {r["ptc"] for r in rows} == {1.0, -1.0}
    m = BENCHMARK.aggregate(cfg, rows, None)
    assert m["ptc"] == pytest.approx(0.1)  # 11 groups +1, 9 groups -1: a number from the numbering of users
    assert m["n_tied"] == 20 and m["tied_share"] == 1.0 and m["n_tied_pair"] == 20
    assert m["tied_share.easy.pair"] == 1.0


def test_constant_predictor_scores_zero_when_ties_are_aware():
    cfg = _cfg(ties="aware")
    rows = scored(cfg, constant_pair_groups())
    assert all(r["ptc"] == 0.0 and r["ptc_rank"] == 0.0 and r["exact_match"] == 0.5 for r in rows)
    m = BENCHMARK.aggregate(cfg, rows, None)
    assert m["ptc"] == 0.0 and m["ptc_rank"] == 0.0 and m["exact_match"] == 0.5
    assert m["n_tied"] == 20 and m["tied_share"] == 1.0


def test_constant_point_predictor_the_user_average_baseline_is_all_ties():
    """Predicting each user's own average makes every point score 0: the reference orders the group by index."""
    line = {"group_id": "g", "mode": "point", "relative_ratings": [-0.5, 1.0, 0.2], "avg_ratings": [3.2, 4.1, 2.5],
            "prediction": [3.2, 4.1, 2.5]}
    ref, aware = score_line(line), score_line(line, "aware")
    assert ref["ties"] and aware["ties"]
    assert ref["ptc"] == ptc([3, 2, 1], ordering_from_values(line["relative_ratings"]))  # index order, not a signal
    assert aware["ptc"] == 0.0 and aware["ptc_rank"] == 0.0 and aware["exact_match"] == pytest.approx(1 / 6)


def test_the_same_rating_for_every_user_is_a_tie_not_a_preference():
    """A point predictor that rates every user 1: the reference orders the group by the users' average ratings
    (score = rating - average), so ptc is ±1 per group from who happens to rate low on average."""
    lines = [{"group_id": f"g{i}", "mode": "point", "relative_ratings": rel, "avg_ratings": avg, "prediction": [1, 1]}
             for i, (rel, avg) in enumerate([([1.0, -1.0], [3.1, 3.6]), ([1.0, -1.0], [3.5, 3.0]),
                                             ([-0.8, 0.9], [3.3, 2.7])])]
    ref = [score_line(x) for x in lines]
    assert [r["ptc"] for r in ref] == [1.0, -1.0, 1.0] and all(r["ties"] for r in ref)
    aware = [score_line(x, "aware") for x in lines]
    assert all(a["ptc"] == 0.0 and a["ptc_rank"] == 0.0 and a["exact_match"] == 0.5 for a in aware)
    # two of three users rated alike: only that pair is tied
    three = {"group_id": "t", "mode": "point", "relative_ratings": [1.0, 0.0, -1.0], "avg_ratings": [3.0, 3.5, 3.0],
             "prediction": [4, 4, 2]}
    assert prediction_tiers("point", three["prediction"], three["avg_ratings"], 3) == [[1, 2], [3]]
    assert score_line(three, "aware")["ptc_rank"] == pytest.approx(2 / 3)


def test_lines_without_ties_score_the_same_under_both():
    lines = [
        {"group_id": "a", "mode": "point", "relative_ratings": [1.0, -1.0, 0.5], "avg_ratings": [3.0, 4.0, 2.0],
         "prediction": [5, 2, 3]},
        {"group_id": "b", "mode": "pair", "relative_ratings": [1.0, -0.5, 0.2], "avg_ratings": [3.0] * 3,
         "prediction": [2, 3, 1], "tied_pairs": []},
        {"group_id": "c", "mode": "list", "relative_ratings": [1.0, -0.5, 0.2, 0.9], "avg_ratings": [3.0] * 4,
         "prediction": [4, 1, 2, 3]},
    ]
    for line in lines:
        ref, aware = score_line(line), score_line(line, "aware")
        assert not ref["ties"] and ref == aware, line["group_id"]


def _enumerated(tiers, label):
    """Each metric averaged over every way to order the users within each tier (brute force)."""
    orders = [sum(choice, []) for choice in itertools.product(*[[list(p) for p in itertools.permutations(t)]
                                                                   for t in tiers])]
    n = len(orders)
    return {"ptc": sum(ptc(o, label) for o in orders) / n, "ptc_rank": sum(ptc_rank(o, label) for o in orders) / n,
            "exact_match": sum(o == label for o in orders) / n}


@pytest.mark.parametrize("seed", range(12))
def test_aware_scores_are_the_mean_over_every_tie_break(seed):
    rng = random.Random(seed)
    n = rng.choice([3, 4, 5])
    scores = [rng.choice([1.0, 2.0, 3.0]) for _ in range(n)]  # few values: ties
    label = ordering_from_values([rng.random() for _ in range(n)])
    tiers = prediction_tiers("point", scores, [0.0] * n, n)
    got, want = aware_scores(tiers, label), _enumerated(tiers, label)
    for key in want:
        assert got[key] == pytest.approx(want[key]), (key, scores, label)


def test_list_answer_naming_a_user_twice_is_a_tie():
    line = {"group_id": "g", "mode": "list", "relative_ratings": [1.0, 0.2, -0.5, -1.0],
            "avg_ratings": [3.0] * 4, "prediction": [1, 4, 4, 4]}  # passes the reference's check_format
    assert prediction_tiers("list", line["prediction"], line["avg_ratings"], 4) == [[1], [4], [3, 2]]
    assert score_line(line)["ties"] and score_line(line, "aware")["ties"]
    # users 2 and 3, never named, are tied: their pair counts 0; 3 pairs agree with the label, 2 disagree
    assert score_line(line, "aware")["ptc_rank"] == pytest.approx(1 / 6)


def test_ties_option_is_recorded_in_the_protocol_and_validated():
    assert protocol_record(BENCHMARK, _cfg())["ties"] == "reference"
    assert protocol_record(BENCHMARK, _cfg(ties="aware"))["ties"] == "aware"
    from llmrec.errors import ConfigError

    with pytest.raises(ConfigError, match="ties"):
        _cfg(ties="random")


def test_score_cli_counts_ties_and_takes_the_ties_option(tmp_path):
    from llmrec.cli import app

    lines = [{"group_id": f"g{i}", "mode": "pair", "relative_ratings": rel, "avg_ratings": [3.0, 3.0],
              "prediction": [1, 2], "tied_pairs": [[1, 2]]}
             for i, rel in enumerate([[1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])]
    pred = tmp_path / "P.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for x in lines))
    for option, want in (([], 1 / 3), (["--option", "ties=aware"], 0.0)):
        out = tmp_path / "M.json"
        res = CliRunner().invoke(app, ["score", "perrecbench", "--predictions", str(pred), "--out", str(out),
                                       *option])
        assert res.exit_code == 0, res.output
        metrics = json.loads(out.read_text())["metrics"]
        assert metrics["ptc"] == pytest.approx(want) and metrics["n_tied"] == 3 and metrics["tied_share"] == 1.0


def test_aggregate_rows_takes_the_ties_mode():
    rows = [dict(r, **BENCHMARK.score(_cfg(), r)) for r in constant_pair_groups(4, 3)]
    assert aggregate_rows(rows, ["easy"])["ptc"] == pytest.approx(0.5)
    assert aggregate_rows(rows, ["easy"], "aware")["ptc"] == 0.0
