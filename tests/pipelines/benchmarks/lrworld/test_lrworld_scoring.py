"""Parsing, metrics, the `llmrec score lrworld` contract, expansion and prompts."""

from __future__ import annotations

import json

import pytest

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.lrworld import BENCHMARK, metrics
from llmrec.pipelines.benchmarks.lrworld.builders.memory import build_memory
from llmrec.pipelines.benchmarks.lrworld.builders.knowledge import build_knowledge
from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig
from llmrec.pipelines.benchmarks.lrworld.parsing import parse_choice
from llmrec.pipelines.benchmarks.lrworld.prompts import messages, read_templates
from llmrec.pipelines.benchmarks.lrworld.samples import (add_noise, expand, read_sample_set, shuffled,
                                                         write_sample_set)
from llmrec.pipelines.benchmarks.lrworld.config import BuildConfig

MCQ = ["Drama", "Comedy", "Horror", "War"]
HIT = [f"Movie {k}" for k in range(10)]


@pytest.mark.parametrize("text,options,want", [
    ("B", MCQ, "B"), ("(C)", MCQ, "C"), ("D.", MCQ, "D"), (" 10 ", HIT, "10"), ("4. Movie 3", HIT, "4"),
    ("Let's think. Option A looks odd... The answer is B.", MCQ, "B"),
    ("Reasoning mentions 3 and 7.\nAnswer: 7", HIT, "7"),
    ("I would pick Horror for this user.", MCQ, "C"),
    ("a user like this likes B", MCQ, "B"),
    ("No idea.", MCQ, None), ("", MCQ, None), (None, MCQ, None), ("E", MCQ, None), ("11", HIT, None),
    ("A or B", MCQ, None),
])
def test_parse_choice(text, options, want):
    assert parse_choice(text, options) == want


def _line(i, gold, parsed, measure="memory_item_item/toy/item", factor="memory_item_item", **kw):
    return {"sample_id": f"s{i}", "measure": measure, "factor": factor, "gold": gold, "options": HIT,
            "output": parsed, "parsed": parsed, **kw}


def test_metrics_accuracy_missed_and_factor():
    lines = [_line(0, "1", "1"), _line(1, "2", "3"), _line(2, "4", None, output="blah"),
             _line(3, "A", "A", measure="entity_attribute/toy/genres", factor="entity_attribute") | {"options": MCQ}]
    m = metrics.score_predictions(lines, {})
    assert m["base/accuracy"] == 0.5 and m["base/missed_rate"] == 0.25
    assert m["base/measure/memory_item_item/toy/item/accuracy"] == pytest.approx(1 / 3)
    assert m["base/factor/entity_attribute/accuracy"] == 1.0
    assert m["base/accuracy_ci_low"] <= 0.5 <= m["base/accuracy_ci_high"]


def test_metrics_reparse_when_parsed_null():
    m = metrics.score_predictions([_line(0, "3", None, output="The answer is 3")], {})
    assert m["base/accuracy"] == 1.0 and m["base/missed_rate"] == 0.0


def test_position_bias_and_noisy_drop_and_popularity():
    lines = []
    for run in range(5):
        for i in range(4):
            ok = i < (2 if run % 2 else 4)
            lines.append(_line(i, "1", "1" if ok else "2", run=run, base_id=f"b{i}", variant="base",
                               gold_pop="non-pop" if i >= 2 else "pop") | {"sample_id": f"b{i}|base|r{run}"})
    for i in range(4):
        lines.append(_line(i, "1", "1" if i < 1 else "2", run=0, base_id=f"b{i}", variant="noisy")
                     | {"sample_id": f"b{i}|noisy|r0"})
    m = metrics.score_predictions(lines, {})
    assert m["position/memory_item_item/toy/item/mean"] == pytest.approx((3 * 1.0 + 2 * 0.5) / 5)
    assert m["position/memory_item_item/toy/item/var"] == pytest.approx(0.06)
    assert m["position/hit1/gold/1"] == 1.0 and m["position/hit1/pred/2"] == pytest.approx(0.2)
    assert m["noisy/factor/memory_item_item/drop"] == pytest.approx(1.0 - 0.25)
    assert m["popularity/nonpop_share_errors"] == 1.0  # the errors are the non-pop golds (runs 1, 3)
    assert m["popularity/nonpop_share_correct"] == pytest.approx(6 / 16)
    assert "noisy/accuracy" in m


def test_score_task_from_file(tmp_path):
    from llmrec.pipelines.runner.scoring import score_file

    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps(_line(i, "1", "1" if i else "5")) + "\n" for i in range(4)))
    out = score_file("lrworld", p)
    assert out["metrics"]["base/accuracy"] == 0.75
    p.write_text(json.dumps({"sample_id": "x"}) + "\n")
    with pytest.raises(DataError, match="lacks required"):
        score_file("lrworld", p)


def test_shuffle_is_stable_and_moves_the_answer(sim_catalog):
    s = build_memory(sim_catalog, "item", 1, seed=0)[0]
    a, b = shuffled(s, 0, 0), shuffled(s, 0, 0)
    assert a == b and a["options"][a["gold_pos"] - 1] == s["candidates"][0]
    assert len({shuffled(s, 0, r)["gold_pos"] for r in range(20)}) > 3


def test_expand_variants_and_prompt(sim_catalog, tmp_path):
    built = build_knowledge(sim_catalog, "genres", sim_catalog.attributes["genres"], 10, 0, history_len=2)
    built += build_memory(sim_catalog, "item", 3, 0)
    add_noise(built, 0)
    cfg = LRWorldConfig(variants=["base", "noisy", "fewshot", "cot"], position_runs=2, shots=1)
    rows = expand(cfg, built)
    knowledge = [r for r in rows if r["factor"] == "entity_attribute"]
    assert {r["variant"] for r in knowledge} == {"base", "noisy", "fewshot", "cot"}
    assert not [r for r in rows if r["factor"] == "memory_item_item" and r["variant"] == "noisy"]
    noisy = next(r for r in knowledge if r["variant"] == "noisy")
    clean = next(r for r in knowledge if r["variant"] == "base" and r["base_id"] == noisy["base_id"])
    assert sum(a != b for a, b in zip(noisy["history"], clean["history"])) == 1
    shot = next(r for r in knowledge if r["variant"] == "fewshot")
    user_msg = messages(read_templates(cfg), shot)[1].content
    assert user_msg.count("Answer:") == 2 and shot["_shots"][0]["gold"] in user_msg
    cot = messages(read_templates(cfg), next(r for r in knowledge if r["variant"] == "cot"))[1].content
    assert "step by step" in cot
    base = messages(read_templates(cfg), clean)[1].content
    assert "Which genres" in base and "A) " in base and "D) " in base and clean["history"][0] in base


def test_sample_set_roundtrip_and_checksum(sim_catalog, tmp_path):
    built = build_memory(sim_catalog, "item", 3, 0)
    out = write_sample_set({"samples": built, "counts": {"m": 3}, "not_built": {"x": "why"}}, BuildConfig(),
                           tmp_path / "set")
    got, manifest = read_sample_set(out)
    assert got == built and manifest["not_built"] == {"x": "why"} and manifest["schema_version"] == 1
    (out / "samples.jsonl").write_text((out / "samples.jsonl").read_text()[:-2] + "\n")
    with pytest.raises(DataError, match="sha256"):
        read_sample_set(out)


def test_benchmark_scores_rows_and_counts_failures(sim_catalog):
    built = build_memory(sim_catalog, "item", 2, 0)
    cfg = LRWorldConfig()
    rows = expand(cfg, built)
    rows[0].update(BENCHMARK.score(cfg, {**rows[0], "output": rows[0]["gold"]}), status="ok")
    rows[1].update(status="failed", output=None)
    m = BENCHMARK.aggregate(cfg, rows, None)
    assert m["base/accuracy"] == 0.5 and m["base/missed_rate"] == 0.5 and m["failed_rows"] == 1.0
    lines = BENCHMARK.predictions(rows, None)
    assert [metrics.ContractLine.model_validate(line) for line in lines] and lines[1]["output"] is None


def test_whole_build_is_reproducible(sim_catalog, embedding_fixture):
    from llmrec.pipelines.benchmarks.lrworld.builders import build_measures

    b = BuildConfig(per_measure=5, clusters=3)
    one = build_measures(sim_catalog, b)
    assert one == build_measures(sim_catalog, b)
    assert one != build_measures(sim_catalog, b.model_copy(update={"seed": 1}))


def test_plot_verb_writes_figures(tmp_path):
    from typer.testing import CliRunner

    from llmrec.pipelines.benchmarks.lrworld.cli import app

    lines = [_line(i, "1", "1" if i % 2 else "2", factor=f, measure=f"{f}/toy/x", run=r, variant=v,
                   base_id=f"b{i}", sample_id=f"{f}/s{i}|{v}|r{r}")
             for f in ("memory_item_item", "memory_user_user", "association_rules") for i in range(4)
             for r in range(2) for v in ("base", "noisy")]
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = CliRunner().invoke(app, ["plot", str(p), str(p), "--label", "m1", "--label", "m2", "--out",
                                   str(tmp_path / "plots")])
    assert res.exit_code == 0, res.output
    names = {x.name for x in (tmp_path / "plots").iterdir()}
    assert {"lrworld_factors.png", "lrworld_radar.png", "lrworld_position_bias.md", "lrworld_noisy_drop.png"} <= names
    assert "| memory_item_item/toy/x | 50.0 ± 0.00 | 50.0 ± 0.00 |" in (tmp_path / "plots" /
                                                                      "lrworld_position_bias.md").read_text()


@pytest.mark.integration  # a clean interpreter: what the benchmark layer imports
def test_benchmark_layer_imports_no_ray_engine_or_trainer():
    import subprocess
    import sys

    code = ("import sys, llmrec.pipelines.benchmarks.lrworld as L, llmrec.pipelines.benchmarks.lrworld.cli, "
            "llmrec.pipelines.benchmarks.lrworld.plots, llmrec.pipelines.benchmarks.lrworld.builders.neural; "
            "bad=[m for m in sys.modules if m.split('.')[0]=='ray' or m.startswith(('llmrec.serving', "
            "'llmrec.tuning', 'llmrec.cluster', 'llmrec.models', 'llmrec.pipelines.runner'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_run_from_a_sample_set_with_filters(sim_catalog, tmp_path):
    from llmrec.pipelines.benchmarks.lrworld.samples import load_samples

    built = build_memory(sim_catalog, "item", 4, 0) + build_memory(sim_catalog, "user", 4, 0)
    write_sample_set({"samples": built, "counts": {}, "not_built": {}}, BuildConfig(), tmp_path / "set")
    cfg = LRWorldConfig(samples_file=tmp_path / "set", per_measure=2, measures=["memory_user_user/toy/user"],
                        position_runs=3)
    got, _ = load_samples(cfg, tmp_path)
    assert [s["sample_id"] for s in got] == ["memory_user_user/toy/user#0", "memory_user_user/toy/user#1"]
    rows = BENCHMARK.build_samples(cfg, tmp_path)
    assert len(rows) == 6 and len({r["sample_id"] for r in rows}) == 6
    with pytest.raises(DataError, match="have no samples"):
        load_samples(cfg.model_copy(update={"measures": ["nope/toy/x"]}), tmp_path)
