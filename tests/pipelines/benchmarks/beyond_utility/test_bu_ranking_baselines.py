"""Beyond Utility's ranking_baselines: a trained recommender ranks every sample's own candidates (as presented
to the LLM), and the rows it gives go through the same metric code as the LLM's answers."""

from __future__ import annotations

import math

from llmrec.pipelines.benchmarks.beyond_utility import BENCHMARK
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig, UserSampling
from tests.conftest import require_data


def test_a_ranker_ranks_each_samples_candidates_and_is_scored_like_the_llm():
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=3))
    samples, assets = BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data)
    ranking = BENCHMARK.ranking_baselines(cfg, samples, assets)
    assert ranking.data["format"] == "movielens-100k" and ranking.data["path"] == "ml-100k"
    ds = assets["dataset"]
    seen = []

    def oracle(users: list[str], candidates: list[list[str]]) -> list[list[str]]:
        """The held-out target first, the other candidates in the order given."""
        seen.extend(zip(users, candidates))
        return [sorted(c, key=lambda item: item != ds.sequences[u][-1]) for u, c in zip(users, candidates)]

    rows = ranking.rows(oracle)
    raw = ds.raw_id
    assert seen == [(s["user_id"], [raw[i] for i in s["candidates"]]) for s in samples]  # as the LLM saw them
    assert [r["sample_id"] for r in rows] == [s["sample_id"] for s in samples]
    assert all(len(r["ranked"]) == cfg.list_len and r["ranked"][0] == r["target"] for r in rows)
    m = BENCHMARK.aggregate(cfg, rows, assets)
    assert m["hr"] == 1.0 and m["ndcg"] == 1.0 and m["hallucination"] == 0.0 and m["unanswered"] == 0.0
    assert math.isnan(m["compliance"])  # a recommender is never asked
    assert len(BENCHMARK.predictions(rows, assets)) == 3


def test_a_ranker_whose_scores_all_tie_is_reported_as_tied():
    """A recommender that scores every candidate alike (BM25 with no word in common, MostPop on unseen items) keeps
    the candidates' given order: its rows say a tie decided their top list, and the metrics count them."""
    from llmrec.models.candidates import Ranked

    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=3))
    samples, assets = BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data)

    def flat(users: list[str], candidates: list[list[str]]) -> list[Ranked]:
        out = []
        for c in candidates:
            r = Ranked(c)
            r.scores = (0.0,) * len(c)
            out.append(r)
        return out

    rows = BENCHMARK.ranking_baselines(cfg, samples, assets).rows(flat)
    assert all(r["tied"] is True for r in rows)
    m = BENCHMARK.aggregate(cfg, rows, assets)
    assert m["n_tied"] == 3 and m["tied_share"] == 1.0
