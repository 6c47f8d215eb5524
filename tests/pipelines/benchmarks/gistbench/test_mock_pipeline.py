"""The reference's golden values, reproduced end to end on the bundled 3-user mock set.

Two scripted subject models (A, B) and one scripted judge run through the real stages
(``llmrec.pipelines.runner.worker.process_samples``, no Ray). The scenario (REFERENCE_NOTES §3.5; the
reference's ``test_smoke.py`` scoring cases, grounded in the mock users):

* user 1, model A: "Music Instruments and Theory" (verified, IS 4/5), "Outdoor Adventure
  Sports" (verified, IS 3/5), "Sourdough Bread Baking" (cites an object the user never
  saw: unverified, 0/0), three categories; model B verifies a third category (Running),
  so the union oracle is 3 → IG_P = IG_R = IG_F1 = 2/3, IS = 0.7.
* user 2, model A: two verified interests in one category (4/5, 3/5) and one in another
  (5/5); union oracle 3 → IG_P = 1, IG_R = 2/3, IS = (0.7 + 1.0)/2 = 0.85.
* user 3, model A: the extraction reply is not JSON → a failed chunk, the user scores 0.
"""

from __future__ import annotations

import json

import pytest

from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.runner.scoring import score_file
from llmrec.pipelines.runner.worker import process_samples
from tests.conftest import require_data
from tests.pipelines.benchmarks.gistbench.conftest import ScriptedEngine, interest_of, kind, last_user, pick

MOCK = "gistbench/gistbench/assets/mock_dataset.json"

EXTRACT = {
    "A": {
        "1": [("Music Instruments and Theory", ["1", "2", "3", "9", "5"]),
              ("Outdoor Adventure Sports", ["4", "5", "6", "10", "8"]),
              ("Sourdough Bread Baking", ["99"])],
        "2": [("Deep Learning Models", ["12", "13", "17", "11", "16"]),
              ("Python Coding Projects", ["11", "18", "12", "16", "14"]),
              ("Statistics and Data Science", ["16", "11", "12", "13", "17"])],
        "3": "I think this user mostly likes art, for example painting.",
    },
    "B": {
        "1": [("Trail Running", ["10", "4", "6"]), ("Music Instruments and Theory", ["1", "2"])],
        "2": [("Web Development with React", ["18", "11", "12"])],
        "3": [("Painting and Drawing", ["19", "20", "21"])],
    },
}
JUDGE = {  # keywords of the objects the IG judge keeps
    "Music Instruments and Theory": ["#music"], "Outdoor Adventure Sports": ["#outdoors"],
    "Deep Learning Models": ["#deeplearning", "#ai"], "Python Coding Projects": ["#python", "#pytorch"],
    "Statistics and Data Science": ["#statistics", "#ml "], "Trail Running": ["#running", "#outdoors", "#camping"],
    "Web Development with React": ["#react", "#coding", "#pytorch"], "Painting and Drawing": ["#art"],
}
IS_PICKS = {  # keywords of the items the IS judge selects
    "Music Instruments and Theory": ["#guitar", "#piano", "#drums", "#musictheory"],
    "Outdoor Adventure Sports": ["#hiking", "#climbing", "#camping"],
    "Deep Learning Models": ["#deeplearning", "#ai", "#python"],
    "Python Coding Projects": ["#coding", "#pytorch", "#react"],
    "Statistics and Data Science": ["#statistics", "#python", "#ml ", "#cv", "#nlp"],
}
CATEGORY = {"Music Instruments and Theory": 146, "Outdoor Adventure Sports": 133, "Sourdough Bread Baking": 110,
            "Deep Learning Models": 16, "Python Coding Projects": 16, "Statistics and Data Science": 112,
            "Trail Running": 243, "Web Development with React": 272, "Painting and Drawing": 86}


def extractor(model: str):
    def respond(req):
        text = last_user(req)
        user = "1" if "[1] " in text else "2" if "[11] " in text else "3"
        reply = EXTRACT[model][user]
        if isinstance(reply, str):
            return reply
        return json.dumps([{"interest": n, "item_ids": ids, "evidence_excerpt": "", "brief_rationale": ""}
                           for n, ids in reply])
    return ScriptedEngine(respond)


def judge_respond(req) -> str:
    k = kind(req)
    if k == "judge":
        idx = pick(req, "Item ", JUDGE.get(interest_of(req), []))
        return ", ".join(map(str, idx)) or "NONE"
    if k == "overlap":
        return "NONE"
    if k == "is":
        return ", ".join(f"item_{i}" for i in pick(req, "item_", IS_PICKS.get(interest_of(req), ["#nothing"])))
    if k == "taxonomy":
        return "\n".join(f"{i}: {CATEGORY[name]}" for i, name in enumerate(asked_names(req), 1))
    raise AssertionError(k)


def asked_names(req) -> list[str]:
    return [line.split(". ", 1)[1] for line in last_user(req).split("\n")[1:] if ". " in line]


def run_model(model: str, cfg: GistbenchConfig, data_dir, judge: ScriptedEngine) -> list[dict]:
    bench = get_benchmark("gistbench")
    samples = bench.build_samples(cfg, data_dir)
    subject = extractor(model)
    rows = process_samples(bench, cfg, samples, {"subject": subject, "judge": judge}.__getitem__,
                           retries=0, backoff_s=0, assets=bench.assets(cfg, data_dir))
    for r in rows:
        r["model_label"] = model
    bench.aggregate(cfg, rows, None)  # as the runner does on the driver: commits the new taxonomy mappings
    return rows


@pytest.fixture
def setup(tmp_path):
    data_dir = require_data(MOCK).parents[3]
    cfg = GistbenchConfig(name="gistbench", dataset="synthetic", path=MOCK,
                          taxonomy={"cache_path": str(tmp_path / "tax.sqlite")})
    judge = ScriptedEngine(judge_respond)
    rows = {m: run_model(m, cfg, data_dir, judge) for m in ("A", "B")}
    return cfg, rows, judge, data_dir, tmp_path


def _by_user(rows):
    return {r["user_id"]: r for r in rows}


def test_stages_record_what_they_did(setup):
    _, rows, _, _, _ = setup
    a = _by_user(rows["A"])
    assert all(r["status"] == "ok" for r in rows["A"] + rows["B"])
    assert a["3"]["failed_chunks"] == 1 and a["3"]["interests"] == [] and a["3"]["n_interests"] == 0
    u1 = {x["interest"]: x for x in a["1"]["interests_scored"]}
    assert u1["Music Instruments and Theory"]["verified"] and u1["Outdoor Adventure Sports"]["verified"]
    assert not u1["Sourdough Bread Baking"]["verified"]
    assert (u1["Music Instruments and Theory"]["correct"], u1["Music Instruments and Theory"]["backing"]) == (4, 5)
    assert (u1["Outdoor Adventure Sports"]["correct"], u1["Outdoor Adventure Sports"]["backing"]) == (3, 5)
    assert (u1["Sourdough Bread Baking"]["correct"], u1["Sourdough Bread Baking"]["backing"]) == (0, 0)
    assert u1["Sourdough Bread Baking"]["insufficient_exp_pos"] is True
    probe = a["1"]["specificity"]["Music Instruments and Theory"]
    # default = the reference: distractors come from the whole pool, user 1's other objects included
    assert len(probe["test_ids"]) == 25
    assert set(probe["test_ids"]) - set(probe["backing"]) & {str(i) for i in range(1, 11)}
    assert "_chunks" not in a["1"] and "_pool" not in a["1"]  # transient inputs are not stored
    trail = {x["interest"]: x for x in _by_user(rows["B"])["1"]["interests_scored"]}["Trail Running"]
    assert trail["verified"] and trail["counts"]["explicit_positive"] == 1 and trail["counts"]["implicit_positive"] == 2


def test_exclude_user_objects_option_keeps_the_users_own_objects_out(setup):
    cfg, _, judge, data_dir, _ = setup
    rows = run_model("A", cfg.model_copy(update={"specificity": cfg.specificity.model_copy(
        update={"exclude_user_objects": True})}), data_dir, judge)
    probe = _by_user(rows)["1"]["specificity"]["Music Instruments and Theory"]
    assert len(probe["test_ids"]) == 5 + 15  # the pool minus user 1's own ten objects
    assert not set(probe["test_ids"]) - set(probe["backing"]) & {str(i) for i in range(1, 11)}


def test_taxonomy_is_shared_across_models(setup):
    _, rows, judge, _, _ = setup
    batches = [asked_names(r) for r in judge.seen if kind(r) == "taxonomy"]
    names = [n for b in batches for n in b]
    assert names.count("Music Instruments and Theory") == 1  # model B reuses model A's mapping
    assert all(1 <= len(b) <= 3 for b in batches)
    b1 = _by_user(rows["B"])["1"]
    assert {x["interest"]: x["category_id"] for x in b1["interests_scored"]}["Music Instruments and Theory"] == 146


def test_golden_values_with_union_oracle(setup, tmp_path):
    cfg, rows, _, _, _ = setup
    bench = get_benchmark("gistbench")
    pred = tmp_path / "predictions.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for m in ("A", "B") for x in bench.predictions(rows[m], None)))
    out = score_file("gistbench", pred, {"model": "A", "oracle": None})["metrics"]
    f1_u1, f1_u2 = 2 / 3, 2 * 1 * (2 / 3) / (1 + 2 / 3)
    hm = lambda a, b: 2 * a * b / (a + b)  # noqa: E731
    assert out["ig_f1_mean"] == pytest.approx((f1_u1 + f1_u2 + 0) / 3)
    assert out["ig_f1_median"] == pytest.approx(2 / 3)
    assert out["ig_p_mean"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert out["ig_r_mean"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert out["is_mean"] == pytest.approx((0.7 + 0.85 + 0) / 3)
    assert out["is_median"] == pytest.approx(0.7)
    assert out["hm_mean"] == pytest.approx((hm(f1_u1, 0.7) + hm(f1_u2, 0.85)) / 3)
    assert out["hm_median"] == pytest.approx(hm(f1_u1, 0.7))
    assert out["fail_insufficient_exp_pos"] == 1.0 and out["n_users"] == 3
    # the run's own aggregation, told about model B's predictions, agrees with `llmrec score`
    b_file = tmp_path / "b.jsonl"
    b_file.write_text("".join(json.dumps(x) + "\n" for x in bench.predictions(rows["B"], None)))
    run_cfg = cfg.model_copy(update={"scoring": cfg.scoring.model_copy(update={"oracle_predictions": [b_file]})})
    agg = bench.aggregate(run_cfg, rows["A"], None)
    for key in ("ig_p_mean", "ig_r_mean", "ig_f1_mean", "is_mean", "hm_mean", "ig_f1_median", "is_median"):
        assert agg[key] == pytest.approx(out[key]), key
    assert agg["failed_chunks"] == 1


def test_supplied_mock_oracle(setup, tmp_path):
    cfg, rows, _, data_dir, _ = setup
    bench = get_benchmark("gistbench")
    oracle = data_dir / "gistbench/gistbench/assets/mock_oracle.json"  # 7, 5 and 4 categories
    run_cfg = cfg.model_copy(update={"scoring": cfg.scoring.model_copy(update={"oracle_path": oracle})})
    agg = bench.aggregate(run_cfg, rows["A"], None)
    f1 = lambda p, r: 2 * p * r / (p + r)  # noqa: E731
    assert agg["ig_r_mean"] == pytest.approx((2 / 7 + 2 / 5 + 0) / 3)
    assert agg["ig_f1_mean"] == pytest.approx((f1(2 / 3, 2 / 7) + f1(1, 2 / 5)) / 3)
    assert agg["users_without_oracle"] == 0
    pred = tmp_path / "a.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for x in bench.predictions(rows["A"], None)))
    out = score_file("gistbench", pred, {"model": "A", "oracle": str(oracle)})["metrics"]
    assert out["ig_f1_mean"] == pytest.approx(agg["ig_f1_mean"])


def test_plots_written(setup, tmp_path):
    cfg, rows, _, _, _ = setup
    paths = get_benchmark("gistbench").plots(cfg, rows["A"], tmp_path / "plots", None)
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_paired_outcomes_are_per_user_scores_whose_medians_are_the_metrics(setup):
    cfg, rows, _, _, _ = setup
    bench = get_benchmark("gistbench")
    agg = bench.aggregate(cfg, rows["A"], None)
    outs = bench.paired_outcomes(cfg, rows["A"], None)
    users = {r["sample_id"]: f"{r['dataset']}/{r['user_id']}" for r in rows["A"] if r["status"] == "ok"}
    assert {o.sample_id: o.cluster for o in outs} == users
    for metric in ("ig_f1_median", "is_median", "hm_median"):
        values = sorted(o.value for o in outs if o.metric == metric)
        assert all(o.statistic == "median" for o in outs)
        assert values[len(values) // 2] == pytest.approx(agg[metric]), metric  # 3 users: the middle one
