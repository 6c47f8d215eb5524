"""`llmrec perrecbench export-sft`: training groups disjoint from the evaluation groups, rendered with
the evaluation's prompts, gold answers as targets."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.errors import ConfigError
from llmrec.pipelines.benchmarks.perrecbench import BENCHMARK
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.sft import export_sft, slot_targets
from llmrec.pipelines.benchmarks.perrecbench.stages import slot_requests
from tests.conftest import require_data

BENCH = {"name": "perrecbench", "levels": ["easy", "medium"], "groups": {"groups_per_level": 5,
         "heldout_per_level": 2}, "prompt": {"profile": False, "k": 2}}


def test_slot_targets_follow_relative_ratings():
    s = {"mode": "pair", "relative_ratings": [0.5, -1.0, 2.0], "size": 3, "ratings": [4, 2, 5]}
    gold = dict(slot_targets(s))
    assert gold["0>1"] == "[User A]" and gold["1>0"] == "[User B]" and gold["2>0"] == "[User A]" and len(gold) == 6
    assert slot_targets(dict(s, mode="list")) == [("list", '{"predicted_ranking": [3, 1, 2]}')]
    assert slot_targets(dict(s, mode="point"))[1] == ("u1", '{"predicted_rating": 2}')


def test_profiles_must_be_off(tmp_path):
    cfg = PerRecBenchConfig.model_validate(dict(BENCH, prompt={"profile": True}))
    with pytest.raises(ConfigError, match="profile: false"):
        export_sft(cfg, None, tmp_path)


def test_no_overlap_with_evaluation_groups(tmp_path):
    data = require_data("ml-100k", "u.data").parents[1]
    cfg = PerRecBenchConfig.model_validate(BENCH)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"benchmark": BENCH}))
    res = CliRunner().invoke(BENCHMARK.cli, ["export-sft", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "o"),
                                             "--per-level", "8", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "o/manifest.json").read_text())
    evaluation = BENCHMARK.build_samples(cfg, data)
    eval_items = {s["item_id"] for s in evaluation}
    eval_users = {u for s in evaluation for u in s["user_ids"]}
    assert eval_items <= set(manifest["eval_items"]) and eval_users <= set(manifest["eval_users"])
    rows = {fmt: [json.loads(x) for x in (tmp_path / "o" / fmt / "train.jsonl").read_text().splitlines()]
            for fmt in ("point", "pair", "list", "mixed")}
    valid = [json.loads(x) for x in (tmp_path / "o/mixed/valid.jsonl").read_text().splitlines()]
    everything = rows["mixed"] + valid
    assert {r["format"] for r in everything} == {"point", "pair", "list"}
    assert len(rows["mixed"]) == len(rows["point"]) + len(rows["pair"]) + len(rows["list"])
    assert not {r["item_id"] for r in everything} & set(manifest["eval_items"])
    assert not {u for r in everything for u in r["user_ids"]} & set(manifest["eval_users"])
    assert not {r["item_id"] for r in rows["mixed"]} & {r["item_id"] for r in valid}
    # rendered with the evaluation's own prompt: the same system text and layout as an evaluation request
    ev = next(s for s in evaluation if s["mode"] == "list")
    eval_msgs = slot_requests(cfg, ev, "list")[0].messages
    tr = rows["list"][0]
    assert tr["messages"][0]["content"] == eval_msgs[0].content
    assert tr["messages"][1]["content"].split("[Users]")[0] == eval_msgs[1].content.split("[Users]")[0]
    assert json.loads(tr["completion"])["predicted_ranking"]
