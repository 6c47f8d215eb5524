"""A subject that "knows" a chosen half of ML-100K: its memorization probe finds coverage ≈ 0.5, and its Beyond
Utility run, split by whether each user's held-out target is an item it memorized, scores better on those (the
fake engine ranks a target first only when it knows the title). The worker without Ray; run directories as
`llmrec run` leaves them."""

from __future__ import annotations

import json
import math

import pytest

from llmrec.config import dump_yaml
from llmrec.pipelines.benchmarks.beyond_utility import BENCHMARK as BU
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig, UserSampling
from llmrec.pipelines.benchmarks.memorization import BENCHMARK as PROBE
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.results.memorized import cells, memorization_splits
from llmrec.pipelines.results.stored import open_runs
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.conftest import require_data

SUBJECT = "knows-half"
NOWHERE = "['A Film That Does Not Exist']"


def _write(tmp_path, name: str, bench: dict, engine: dict, rows: list[dict]) -> str:
    cfg = RunConfig.model_validate({"benchmark": bench, "engine": engine, "data": {"dir": str(tmp_path)},
                                    "output": {"dir": str(tmp_path / "runs"), "run_name": name},
                                    "tracking": {"enabled": False}})
    d = tmp_path / "runs" / name
    ResultStore(d / "results").write(rows)
    (d / "resolved.yaml").write_text(dump_yaml(cfg))
    (d / "metrics.json").write_text(json.dumps({"n_samples": len(rows)}))
    return str(d)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    tmp = tmp_path_factory.mktemp("split")
    probe_bench = {"name": "memorization", "items": None}
    probe_rows = PROBE.build_samples(MemorizationConfig(**probe_bench), data)
    known = {r["gold"] for r in probe_rows if int(r["key"]) % 2 == 0}  # the even IDs: half of the catalogue
    rules = [{"contains": f"Input: {r['key']}|", "reply": f"{r['key']}|{r['gold']}" if r["gold"] in known else "?"}
             for r in sorted(probe_rows, key=lambda r: -len(r["key"]))]
    engine = {"type": "fake", "model": SUBJECT, "default": "?", "rules": rules}
    eng = build_engine(engine)
    probed = process_samples(PROBE, MemorizationConfig(**probe_bench), [dict(r) for r in probe_rows],
                             lambda _: eng, retries=0, backoff_s=0.0)
    probe = _write(tmp, "probe", probe_bench, engine, probed)

    bu_bench = {"name": "beyond_utility", "users": {"n_users": 24, "method": "first"}}
    cfg = BeyondUtilityConfig(users=UserSampling(n_users=24, method="first"))
    samples = BU.build_samples(cfg, data)
    targets = sorted({s["target_title"] for s in samples if s["target_title"] in known})
    # a memorized target is ranked first when its title is in the prompt (a prompt holding two known titles gets
    # the first rule's: a miss for one of them); an unknown target never is
    engine = {"type": "fake", "model": SUBJECT, "default": NOWHERE,
              "rules": [{"contains": t, "reply": repr([t])} for t in targets]}
    eng = build_engine(engine)
    ranked = process_samples(BU, cfg, samples, lambda _: eng, retries=0, backoff_s=0.0)
    bu = _write(tmp, "bu", bu_bench, engine, ranked)
    return data, probe, bu, probed, targets


def test_the_probe_finds_the_half_the_subject_knows(runs):
    _, _, _, probed, _ = runs
    m = PROBE.aggregate(MemorizationConfig(name="memorization", items=None), probed, None)
    assert m["n_answered"] == len(probed) == 1682
    assert m["coverage"] == pytest.approx(0.5, abs=0.01) and m["coverage_ci_low"] < 0.5 < m["coverage_ci_high"]


def test_beyond_utility_split_by_memorized_target_has_the_expected_sign(runs):
    data, probe, bu, _, targets = runs
    stored = open_runs([probe, bu])
    splits = memorization_splits(stored, data_dir=data, resamples=500)
    hr = [s for s in splits if s["metric"] == "hr"]
    assert hr and {s["entry"] for s in splits} == {"beyond_utility"} and {s["subject"] for s in splits} == {SUBJECT}
    for s in hr:
        assert s["catalogue"] == "movielens-100k:ml-100k" and s["n_unprobed"] == 0
        assert s["n_memorized"] > 0 and s["n_not_memorized"] > 0
        assert s["mean_not_memorized"] == 0.0  # an unknown target is never ranked
        assert s["mean_memorized"] > 0.3 and s["diff"] > 0 and s["ci_low"] > 0, s
    row = cells(hr[0])
    assert row[:4] == [SUBJECT, "beyond_utility", hr[0]["setting"], "hr"] and "[+" in row[-1]


def test_no_probe_run_gives_no_split(runs):
    data, _, bu, _, _ = runs
    assert memorization_splits(open_runs([bu]), data_dir=data) == []


def test_a_target_the_probe_did_not_ask_is_unprobed_not_unmemorized(runs, tmp_path):
    """A probe of 30 items misses nearly every user's target: those units are counted apart, and a side with no
    unit is NaN (†), never a number that looks sure."""
    data, probe, bu, probed, _ = runs
    few = [r for r in probed if int(r["key"]) <= 30]
    engine = {"type": "fake", "model": SUBJECT}
    small = _write(tmp_path, "probe30", {"name": "memorization", "items": 30}, engine, few)
    hr = [s for s in memorization_splits(open_runs([small, bu]), data_dir=data, resamples=200) if s["metric"] == "hr"]
    assert hr and all(s["n_unprobed"] > 0 for s in hr)
    for s in hr:
        if not (s["n_memorized"] and s["n_not_memorized"]):
            assert math.isnan(s["diff"]) and "†" in cells(s)[-1]


def test_the_report_and_compare_show_the_split(runs, tmp_path):
    """Two subjects in one suite-like pair of folders: `llmrec compare` writes the split into comparison.json and
    prints it; `llmrec report` has a "Memorized vs not" table."""
    import re
    import shutil

    from typer.testing import CliRunner

    from llmrec.cli import _mount_extra_verbs, app
    from llmrec.pipelines.results.html_report import render

    data, probe, bu, _, _ = runs
    other = tmp_path / "bu-again"
    shutil.copytree(bu, other)
    if not any(c.name == "compare" for c in app.registered_commands):
        _mount_extra_verbs()
    res = CliRunner().invoke(app, ["compare", bu, str(other), probe, "--resamples", "200", "--data-dir", str(data),
                                   "--out", str(tmp_path / "cmp"), "--metric", "hr"])
    assert res.exit_code == 0, res.output
    assert "memorized vs not" in res.output
    doc = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert doc["memorized"] and all(s["diff"] > 0 for s in doc["memorized"] if s["metric"] == "hr")
    text = re.sub(r"<[^>]+>", " ", render([probe, bu]))
    assert "Memorized vs not" in text and "+0.7" in text


def test_lrworld_rows_name_their_item_by_id_and_user_probes_none():
    from llmrec.pipelines.benchmarks.lrworld import BENCHMARK as LRW
    from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig

    cfg = LRWorldConfig(name="lrworld")  # built from ML-100K by default
    item = {"dataset": "ml-100k", "field": "genres", "candidate_ids": ["56", None, None, None]}
    assert LRW.target_item(cfg, item) == ("movielens-100k:ml-100k", "id", "56")
    assert LRW.target_item(cfg, {**item, "field": "user"}) is None
    assert LRW.target_item(cfg, {**item, "dataset": "elsewhere"}) is None
    assert PROBE.probed_catalogue(MemorizationConfig(name="memorization")) == "movielens-100k:ml-100k"
    assert PROBE.probed_catalogue(MemorizationConfig(name="memorization", probe="user")) is None
