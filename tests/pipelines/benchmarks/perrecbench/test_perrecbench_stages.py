"""Samples from a hand-made rating table, run through the real stage loop (the runner's
``process_samples``, no Ray) against the scripted FakeEngine."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from llmrec import tracking
from llmrec.pipelines.benchmarks.perrecbench import BENCHMARK
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.profiles import profile_request
from llmrec.pipelines.benchmarks.perrecbench.samples import build_from_frames
from llmrec.pipelines.benchmarks.perrecbench.stages import slot_requests
from llmrec.pipelines.protocol import protocol_record
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig
from tests.conftest import require_data

DAY = 86400
GENRES = ["space opera", "garden tools", "jazz piano", "mystery novel", "kitchen knife", "trail shoes"]


def tables(n_items: int = 6) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per query item four users (relative ratings +2, 0, -1, -2.5) with 14 earlier ratings each."""
    rows, items = [], [(f"h{g}-{j}", f"{GENRES[g]} item {j}") for g in range(len(GENRES)) for j in range(20)]
    for k in range(n_items):
        items.append((f"q{k}", f"{GENRES[k % len(GENRES)]} deluxe {k}"))
        for u, (base, rating) in enumerate([(3, 5), (4, 4), (3, 2), (4.5, 2)]):
            user = f"u{k}-{u}"
            for d in range(14):
                rows.append((user, f"h{(k + u + d) % len(GENRES)}-{d}", float(base), (d + 1) * DAY))  # mean = base
            rows.append((user, f"q{k}", float(rating), (100 + u) * DAY))
    return (pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"]),
            pd.DataFrame(items, columns=["item_id", "title"]))


def config(**over) -> PerRecBenchConfig:
    base = {"groups": {"min_history": 10, "window_days": 10, "groups_per_level": 2, "heldout_per_level": 2},
            "prompt": {"templates": "builtin"}}  # the stage mechanics, on the package's own wording (no data dir)
    for key, value in over.items():
        base.setdefault(key, {}).update(value) if isinstance(value, dict) else base.__setitem__(key, value)
    return PerRecBenchConfig(**base)


class Recorder:
    """FakeEngine that keeps every request it was sent."""

    def __init__(self, **cfg):
        defaults = {"default": '{"predicted_rating": 4}', "rules": [
            {"contains": "### Rating History", "reply": "Enjoys the odd gadget."},
            {"contains": "[Users]", "reply": '{"predicted_ranking": [2, 1, 3]}'},
            {"contains": "[User A]\n<|", "reply": "[User A]"}]}
        self.engine, self.requests = FakeEngine(FakeEngineConfig(**{**defaults, **cfg})), []

    def generate(self, requests):
        self.requests.extend(requests)
        return self.engine.generate(requests)


def run(cfg, **engine):
    inter, items = tables()
    samples = build_from_frames(cfg, inter, items)
    rec = Recorder(**engine)
    return process_samples(BENCHMARK, cfg, samples, lambda role: rec), rec


def count(rec, marker):
    return sum(marker in r.messages[-1].content for r in rec.requests)


def test_samples_carry_the_score_contract_and_no_labels_in_prompts():
    cfg = config()
    inter, items = tables()
    samples = build_from_frames(cfg, inter, items)
    assert len(samples) == 2 * 3 * 3  # groups per level x levels x modes
    s = samples[0]
    assert s["sample_id"] == f"{s['group_id']}/{s['mode']}" and s["prediction"] is None
    assert len(s["relative_ratings"]) == len(s["avg_ratings"]) == len(s["ratings"]) == s["size"]
    for u in s["_users"]:
        assert all(it["item_id"] != s["item_id"] for it in u["retrieved"] + u["profile_items"])
        assert len(u["retrieved"]) == 4 and len(u["profile_items"]) == 14
    json.dumps(samples)  # JSON-able


def test_request_counts_per_group_and_predictions():
    out, rec = run(config(levels=["medium"]))
    assert all(s["status"] == "ok" for s in out)
    assert count(rec, "### Rating History") == 2 * 3 * 3  # each sample asks its users' profiles once
    by_mode = {m: [s for s in out if s["mode"] == m] for m in ("point", "pair", "list")}
    assert all(s["prediction"] == [4, 4, 4] and not s["missed"] for s in by_mode["point"])
    assert count(rec, "[Users]") == 2  # one list prompt per group
    pair_calls = count(rec, "[User A]\n<|")
    assert pair_calls == 2 * 3 * 2  # always "[User A]": 3 distinct comparisons per group, both orders
    assert all(s["prediction"] == [1, 3, 2] for s in by_mode["pair"])


def test_unparsable_answers_are_retried_with_new_seeds_then_missed():
    out, rec = run(config(levels=["easy"], modes=["point"], sampling={"max_attempts": 3}), default="no idea")
    s = out[0]
    assert s["status"] == "ok" and s["prediction"] == [None, None] and s["missed"] and s["ptc"] is None
    seeds = sorted(r.sampling.seed for r in rec.requests if "[User History]" in r.messages[-1].content)
    assert seeds == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]  # 2 groups x 2 users, 3 attempts each
    m = BENCHMARK.aggregate(config(levels=["easy"], modes=["point"]), out, None)
    assert m["missed"] == 2 and m["missed.easy.point"] == 2


def test_self_consistency_sends_m_completions_and_votes():
    cfg = config(levels=["easy"], modes=["list"], prompt={"samples": 3})
    out, rec = run(cfg, rules=[{"contains": "### Rating History", "reply": "p"},
                               {"contains": "[Users]", "reply": '{"predicted_ranking": [2, 1]}'}])
    assert count(rec, "[Users]") == 2 * 3
    assert {r.sampling.seed for r in rec.requests if "[Users]" in r.messages[-1].content} == {0, 1, 2}
    assert all(s["prediction"] == [2, 1] for s in out)


def test_without_profile_there_is_no_profile_stage_or_profile_lines():
    out, rec = run(config(levels=["easy"], prompt={"profile": False}))
    assert count(rec, "### Rating History") == 0
    assert all("## User Profile" not in r.messages[-1].content for r in rec.requests)
    assert [st.name for st in BENCHMARK.stages(config(prompt={"profile": False}))] == ["point", "pair", "list"]


def test_profile_requests_are_identical_across_modes_so_the_cache_answers_them():
    cfg = config(levels=["easy"])
    inter, items = tables()
    samples = build_from_frames(cfg, inter, items)
    g = samples[0]["group_id"]
    reqs = {s["mode"]: profile_request(cfg, s, s["_users"][0]).cache_payload() for s in samples if s["group_id"] == g}
    assert reqs["point"] == reqs["pair"] == reqs["list"]


def test_constraints_follow_the_switch_and_cot():
    inter, items = tables()
    for over, expect in (({}, False), ({"sampling": {"constrained": True}}, True),
                         ({"sampling": {"constrained": True}, "prompt": {"cot": True}}, False)):
        cfg = config(levels=["easy"], **over)
        for s in build_from_frames(cfg, inter, items):
            s["profiles"] = {}
            tag = {"point": "u0", "list": "list", "pair": "0>1"}[s["mode"]]
            (req,) = slot_requests(cfg, s, tag)
            assert (req.constraint is not None) is expect
            if expect and s["mode"] == "pair":
                assert req.constraint.choices == ["[User A]", "[User B]"]


@pytest.mark.parametrize("mode", ["list", "pair", "point"])
def test_few_shot_demonstrations_come_first_with_their_gold_answers(mode):
    cfg = config(levels=["easy"], modes=[mode], prompt={"shots": 2})
    inter, items = tables()
    samples = build_from_frames(cfg, inter, items)
    s = samples[0]
    s["profiles"] = {}
    tag = {"point": "u0", "list": "list", "pair": "0>1"}[mode]
    text = slot_requests(cfg, s, tag)[0].messages[-1].content
    marker = {"point": "[User History]", "list": "[Users]", "pair": "[User A]\n<|"}[mode]
    assert text.count(marker) == 3  # two demonstrations, then the task
    answer = {"point": '{"predicted_rating": ', "list": '{"predicted_ranking": ', "pair": "\n[User "}[mode]
    assert text.count(answer) >= 2
    if mode != "point":  # list/pair demonstrations come from held-out groups: other query items
        test_items = {x["item_id"] for x in samples}
        assert all(sh["item"]["item_id"] not in test_items for sh in s["_shots"])


def test_reference_mean_mode_leaks_the_query_rating():
    """Every user has 14 earlier ratings equal to ``base``: the default mean is ``base``; the
    reference's whole-list mean also averages in the query rating (the label)."""
    inter, items = tables()
    for mode, expect in (("before_query", lambda b, r: b), ("reference", lambda b, r: (14 * b + r) / 15)):
        cfg = config(levels=["easy"], modes=["point"], groups={"mean_mode": mode})
        for s in build_from_frames(cfg, inter, items):
            for user, avg, rating, rel in zip(s["user_ids"], s["avg_ratings"], s["ratings"], s["relative_ratings"]):
                base = [3.0, 4.0, 3.0, 4.5][int(user.split("-")[1])]
                assert avg == pytest.approx(expect(base, rating)) and rel == pytest.approx(rating - avg)


def test_movielens_100k_builds_through_the_interaction_layer():
    from llmrec.pipelines.benchmarks.perrecbench.groups import spread_ok

    data_dir = require_data("ml-100k", "u.data").parents[1]
    cfg = PerRecBenchConfig(groups={"groups_per_level": 20, "heldout_per_level": 5})
    samples = BENCHMARK.build_samples(cfg, data_dir)
    assert len(samples) == 20 * 3 * 3
    assert {s["size"] for s in samples if s["level"] == "hard"} == {4}
    for s in samples:
        assert spread_ok(s["relative_ratings"], 0.6)
        assert s["window"][1] - s["window"][0] == 30 * DAY
        assert s["_query"]["title"] and s["_query"]["title"] != s["item_id"]
        assert all(len(u["retrieved"]) == 4 for u in s["_users"])
    items = {lv: {s["item_id"] for s in samples if s["level"] == lv} for lv in cfg.levels}
    assert items["easy"] == items["medium"] == items["hard"]  # the reference's layout
    assert [s["sample_id"] for s in BENCHMARK.build_samples(cfg, data_dir)] == [s["sample_id"] for s in samples]


@pytest.mark.parametrize("bad,match", [
    ({"prompt": {"kk": 4}}, "prompt.kk"),
    ({"prompt": {"shots": 3}, "groups": {"heldout_per_level": 2}}, "heldout_per_level"),
    ({"groups": {"sizes": {"easy": 2}}}, "no size"),
    ({"groups": {"sizes": {"easy": 1, "medium": 3, "hard": 4}}}, "at least 2"),
    ({"modes": ["point", "point"]}, "without repeats"),
])
def test_bad_configs_fail_at_load_naming_the_key(bad, match):
    from llmrec.errors import ConfigError
    from llmrec.pipelines.registry import benchmark_config

    with pytest.raises(ConfigError, match=match):
        benchmark_config({"name": "perrecbench", **bad})


def test_default_is_the_references_free_text_with_five_calls_and_is_recorded_in_protocol():
    """Reference: no output constraint; an unparsable answer is re-asked (max_retries = 5 calls in
    all), then "format_not_correct" = missed. The option is in the run's ``protocol`` tag."""
    defaults = PerRecBenchConfig()
    assert defaults.sampling.constrained is False and defaults.sampling.max_attempts == 5
    tag = json.loads(tracking.run_tags("run", protocol_record(BENCHMARK, defaults))[tracking.TAG_PROTOCOL])
    assert tag["sampling"]["constrained"] is False and tag["sampling"]["max_attempts"] == 5
    out, rec = run(config(levels=["easy"], modes=["point"]), default="I would say 4 stars")
    asked = [r for r in rec.requests if "[User History]" in r.messages[-1].content]
    assert all(r.constraint is None and r.sampling.max_tokens == 800 for r in asked)
    assert sorted(r.sampling.seed for r in asked) == [k for k in range(5) for _ in range(4)]  # 2 groups x 2 users
    assert all(s["prediction"] == [None, None] and s["missed"] for s in out)
    # free text is parsed as the reference does: the last {...} of the reply
    out, _ = run(config(levels=["easy"], modes=["point"]), default='Sure. {"predicted_rating": 5} Done.')
    assert all(s["prediction"] == [5, 5] and not s["missed"] for s in out)
