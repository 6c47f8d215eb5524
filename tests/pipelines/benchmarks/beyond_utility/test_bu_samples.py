"""Samples, prompts, parsing and title mapping (no model): the reference's rules and our named options."""

from __future__ import annotations


import pytest

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.beyond_utility import parsing, prompts, results
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig, UserSampling
from llmrec.pipelines.benchmarks.beyond_utility.users import sample_users
from llmrec.pipelines.registry import get_benchmark
from llmrec.types import Result
from tests.conftest import require_data


def test_parse_titles_python_json_and_noncompliant():
    assert parsing.parse_titles("Sure: ['A (1995)', \"Bob's Movie\"] ok") == ["A (1995)", "Bob's Movie"]
    assert parsing.parse_titles('["x", "y"]') == ["x", "y"]
    assert parsing.parse_titles("['a', 'b'") is None
    assert parsing.parse_titles("no list here") is None
    assert parsing.parse_titles("[]") is None


def test_fit_pads_with_reference_na_and_cuts():
    assert parsing.fit(["a"], 3) == ["a", "N\\A", "N\\A"]
    assert parsing.fit(list("abcd"), 2) == ["a", "b"]


def test_title_index_exact_casefold_html_duplicates_fuzzy_and_padding():
    titles = {1: "Toy Story (1995)", 2: "Tom &amp; Jerry", 3: "Twin", 4: "Twin", 5: "N\\A"}
    idx = parsing.TitleIndex(titles)
    assert idx.ids(["Toy Story (1995)", "toy story (1995)", "tom & jerry", "Twin", "Toy Storyy (1995)"]) == [1, 1, 2, 4, 0]
    assert idx.lookup("N\\A") == 0  # padding: zero (default) counts a pad as hallucinated
    assert parsing.TitleIndex(titles, padding="untitled_item").lookup("N\\A") == 5  # the reference's quirk
    assert parsing.TitleIndex(titles, mode="fuzzy").lookup("Toy Storyy (1995)") == 1


def test_render_replaces_double_quotes_and_llmrank_numbers_lines():
    text = prompts.render("U {user_name} {dataset} {user_history} -> {candidate_list}", "history", dataset="movie",
                          user_name="7", history=['Say "Hi"'], candidates=["a", "b"])
    assert text == "U 7 movie [\"Say 'Hi'\"] -> ['a', 'b']".replace('"', "'")
    assert '"' not in text
    text = prompts.render("H:\n{user_history}\nC:\n{candidate_list}", "llmrank", dataset="", user_name="",
                          history=["x", "y"], candidates=["c"])
    assert text == "H:\n0. x\n1. y\nC:\n0. c"
    ic = prompts.render("{last_history} then {last_item}", "in_context", dataset="", user_name="",
                        history=["a", "b", "c"], candidates=[])
    assert ic == "['a', 'b'] then c"


def test_paraphrase_pick_is_stable_and_recorded():
    a = [prompts.pick_paraphrase(5, "per_user", 0, 2020, f"u{i}", "history") for i in range(50)]
    assert a == [prompts.pick_paraphrase(5, "per_user", 0, 2020, f"u{i}", "history") for i in range(50)]
    assert len(set(a)) == 5
    assert prompts.pick_paraphrase(5, "fixed", 3, 0, "u", "history") == 3


def test_last_paragraph():
    assert prompts.last_paragraph("Intro.\n\nThe user likes noir.\n") == "The user likes noir."


def test_ks_sampling_records_seed_and_p():
    stat = {f"u{i:03d}": float(i % 37) for i in range(300)}
    users, rec = sample_users(stat, UserSampling(n_users=40, seed=5))
    assert len(users) == 40 and rec["p_value"] > 0.05 and rec["seed"] >= 5
    again, rec2 = sample_users(stat, UserSampling(n_users=40, seed=5))
    assert again == users and rec2 == rec
    skewed = {f"u{i}": float(i) for i in range(100)}
    with pytest.raises(DataError, match="no draw"):
        sample_users(skewed, UserSampling(n_users=10, alpha=0.9999, max_draws=3))


def test_config_errors_name_the_problem():
    with pytest.raises(ValueError, match="pool_path"):
        BeyondUtilityConfig(task="reranking")
    with pytest.raises(ValueError, match="exceeds list_len"):
        BeyondUtilityConfig(k=8, list_len=5)


@pytest.fixture(scope="module")
def built():
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    bench = get_benchmark("beyond_utility")
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=12), prompts=["history", "profile_history"],
                              history_lens=[0, 3], orders=["shuffled", "target_first"])
    return bench, cfg, bench.build_samples(cfg, data), bench.assets(cfg, data)


def test_ml100k_samples_candidates_and_settings(built):
    bench, cfg, samples, assets = built
    assert len(samples) == 12 * 2 * 2 * 2
    by_user: dict[str, list[dict]] = {}
    for s in samples:
        by_user.setdefault(s["user_id"], []).append(s)
        assert len(s["candidates"]) == 20 and s["target"] in s["candidates"]
        assert sorted(s["candidates"]) == sorted(s["base_candidates"]) and s["base_candidates"][0] == s["target"]
        assert s["history_len"] >= 19  # ML-100K users have >= 20 ratings
        shown = s["history_shown"]
        assert len(s["_history_titles"]) == int(shown)
        if s["order"] == "target_first":
            assert s["candidates"][0] == s["target"]
        if shown == "0" and s["prompt"] == "history":
            assert s["template"] == "no_history"
    for rows in by_user.values():  # one shuffled order per user in every setting
        assert len({tuple(r["candidates"]) for r in rows if r["order"] == "shuffled"}) == 1
    assert samples[0]["user_draw"]["p_value"] > 0.05


def test_stages_requery_until_compliant(built):
    bench, cfg, samples, assets = built
    profile, rank = bench.stages(cfg)
    s = dict(next(x for x in samples if x["prompt"] == "profile_history" and x["history_shown"] == "3"))
    s.update(profile.accept(s, Result(text="Thinking...\nLikes 90s dramas.")))
    assert s["profile"] == "Likes 90s dramas."
    req = rank.next_requests(s)[0]
    assert "Likes 90s dramas." in req.messages[1].content and req.sampling.temperature == 0.0
    assert req.messages[0].content.startswith("Requirements: you must choose 10 items")
    s.update(rank.accept(s, [req], [Result(text="I cannot")]))
    req2 = rank.next_requests(s)[0]
    assert req2.sampling.temperature == cfg.query.retry_temperature and req2.sampling.seed == 1
    s.update(rank.accept(s, [req2], [Result(text=str(s["_candidate_titles"][:10]))]))
    state = s["answers"]["rank"]
    assert rank.next_requests(s) == [] and state["attempts"] == 2 and state["state"] == "ok"
    assert state["texts"][0] == "I cannot" and state["answer"] == s["_candidate_titles"][:10]
    line = results.contract_line(s, assets)
    assert line["ranked"][:3] != [0, 0, 0] and len(line["ranked"]) == 10
    m = results.setting_metrics(cfg, [s], assets)
    assert m["compliance"] == pytest.approx(0.5) and m["hallucination"] < 1


def test_requery_is_bounded(built):
    bench, cfg, samples, assets = built
    _, rank = bench.stages(cfg)
    s = dict(samples[0])
    for _ in range(cfg.query.max_attempts):
        s.update(rank.accept(s, rank.next_requests(s), [Result(text="nope")]))
    assert rank.next_requests(s) == []
    assert results.contract_line(s, assets)["ranked"] == [0] * 10


def test_items_file_matches_contract(built, tmp_path):
    from llmrec.pipelines.benchmarks.beyond_utility.contract import read_items

    bench, cfg, samples, assets = built
    ds, _ = results.lookup(assets, samples[0])
    cat = read_items(ds.write_items(tmp_path / "items.jsonl"))
    assert cat.n_users == 943 and sum(cat.train_freq.values()) == 100000 - 943
    assert cat.categories[1] == ("Animation", "Children's", "Comedy")
