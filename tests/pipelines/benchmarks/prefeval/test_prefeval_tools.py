"""`llmrec prefeval export-sft` and `llmrec prefeval compare`, config checks, plots."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.config import validate
from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval.compare import compare
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.data import load_conflicting
from llmrec.pipelines.benchmarks.prefeval.plots import run_plots
from llmrec.pipelines.benchmarks.prefeval.sft import REFERENCE_TEST_TOPICS, export_sft
from llmrec.pipelines.common.plotting import read_left_out
from llmrec.pipelines.common.store import ResultStore
from tests.conftest import require_data


@pytest.fixture(scope="module")
def data():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


def source_run(tmp_path):
    run = tmp_path / "run"
    recs = []
    for topic in ("travel_hotel", "shop_motors"):
        for method in ("reminder", "zero-shot"):
            recs.append({"sample_id": f"{topic}/explicit/0000/t000/{method}", "status": "ok", "task": "gen",
                         "topic": topic, "form": "explicit", "method": method, "turns": 0, "task_id": 0,
                         "preference": f"PREF {topic}", "question": f"Q {topic}?", "pref_reply": "Noted.",
                         "output": f"ANSWER {topic} {method}"})
    ResultStore(run / "results").write(recs)
    (run / "resolved.yaml").write_text(yaml.safe_dump({"benchmark": {"system_prompt": "SYS"}}))
    return run


def test_export_sft(tmp_path, data):
    counts = export_sft([source_run(tmp_path)], data, tmp_path / "sft")
    assert counts == {"train": 3, "test": 3}  # travel_hotel trains, shop_motors is held out; × 0/5/10 turns
    train = [json.loads(x) for x in (tmp_path / "sft/train.jsonl").read_text().splitlines()]
    test = [json.loads(x) for x in (tmp_path / "sft/test.jsonl").read_text().splitlines()]
    assert {r["topic"] for r in test} == {"shop_motors"} and "shop_motors" in REFERENCE_TEST_TOPICS
    ten = next(r for r in train if r["inserted_turns"] == 10)
    roles = [m["role"] for m in ten["messages"]]
    assert roles == ["system", "user", "assistant"] + ["user", "assistant"] * 10 + ["user", "assistant"]
    assert ten["messages"][-2]["content"] == "Q travel_hotel?"  # bare question: no reminder
    assert ten["messages"][-1]["content"] == "ANSWER travel_hotel reminder"  # the reminder-method answer
    chats = json.loads((data / "prefeval/benchmark_dataset/filtered_inter_turns.json").read_text())
    last4 = [m for c in chats[-4:] for m in c["conversation"]]
    assert ten["messages"][3]["content"] == last4[0]["content"]
    zero = next(r for r in train if r["inserted_turns"] == 0)
    assert len(zero["messages"]) == 5
    empty = tmp_path / "empty"
    (empty / "results").mkdir(parents=True)
    with pytest.raises(DataError, match="method reminder"):
        export_sft([empty], data, tmp_path / "x")


def write_run(path, task, model, cells):
    path.mkdir(parents=True)
    (path / "resolved.yaml").write_text(yaml.safe_dump({"benchmark": {"task": task}, "engine": {"type": "fake", "model": model}}))
    (path / "metrics.json").write_text(json.dumps({"accuracy": 0.5, **{f"accuracy.cell.{k}": v for k, v in cells.items()}}))
    return path


def test_compare_and_cli(tmp_path):
    mcq = [write_run(tmp_path / "m1", "mcq", "a", {"explicit.zero-shot.2": 0.9, "explicit.reminder.2": 0.95,
                                                    "explicit.zero-shot.8": 0.5}),
           write_run(tmp_path / "m2", "mcq", "b", {"explicit.zero-shot.2": 0.6})]
    gen = [write_run(tmp_path / "g1", "gen", "a", {"explicit.zero-shot.2": 0.4, "explicit.reminder.2": 0.8,
                                                    "explicit.zero-shot.8": 0.1, "explicit.cot.2": 0.3}),
           write_run(tmp_path / "g2", "gen", "b", {"explicit.zero-shot.2": 0.2})]
    out = compare(mcq, gen, tmp_path / "scatter.png")
    assert out["n"] == 4 and out["pearson_r"] == pytest.approx(0.8942, abs=1e-3)
    assert (tmp_path / "scatter.png").stat().st_size > 0
    with pytest.raises(DataError, match="expected a 'gen' run"):
        compare(mcq, mcq)
    from llmrec import cli

    cli._mount_benchmark_clis()
    res = CliRunner().invoke(cli.app, ["prefeval", "compare", "--mcq", str(mcq[0]), "--mcq", str(mcq[1]),
                                       "--gen", str(gen[0]), "--gen", str(gen[1]), "--plot", str(tmp_path / "p.png"),
                                       "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "r.json").read_text())["n"] == 4 and "Pearson r = 0.894" in res.output
    res = CliRunner().invoke(cli.app, ["prefeval", "export-sft", "--help"])
    assert res.exit_code == 0 and "0/5/10" in res.output


def test_config_checks(tmp_path):
    with pytest.raises(ConfigError, match="position"):
        validate(PrefEvalConfig, {"positions": ["top"]}, "benchmark")
    with pytest.raises(ConfigError, match="benchmark.methods"):
        validate(PrefEvalConfig, {"methods": ["few-shot"]}, "benchmark")
    with pytest.raises(DataError, match="conflicting-preference file not found"):
        load_conflicting(tmp_path / "none.json")
    with pytest.raises(ConfigError, match="unknown key 'benchmark.judge_mod'"):
        validate(PrefEvalConfig, {"judge_mod": "strict"}, "benchmark")
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps([{"topic": "travel_hotel", "task_id": "0", "conflicting_preference": "x"}]))
    with pytest.raises(DataError, match="record 0 needs"):
        load_conflicting(bad)


def test_plots(tmp_path):
    rows = [{"status": "ok", "form": "explicit", "method": m, "turns": t, "position": p, "correct": c,
             "unaware_violation": not c, "hallucinated_violation": False, "inconsistent_violation": False,
             "unhelpful": False} for m in ("zero-shot", "rag") for t in (2, 8) for p in ("start", "end") for c in (True, False)]
    names = {p.name for p in run_plots("gen", rows, tmp_path)}
    assert names == {"accuracy_by_turns.png", "error_types_by_method.png", "accuracy_by_position.png"}
    # one sample: one turn count, nothing to draw a line through: left out, and the reason recorded beside the plots
    assert BENCHMARK.plots(PrefEvalConfig(), rows[:1], tmp_path / "m", None) == []
    assert read_left_out(tmp_path / "m") == {"accuracy_by_turns.png": "one turns value (2): nothing to draw a line "
                                                                      "through"}


def test_shipped_configs_validate():
    from pathlib import Path

    from llmrec.pipelines.runner.run_config import load_run_config

    files = sorted((Path(__file__).resolve().parents[4] / "configs").glob("prefeval_*.yaml"))
    assert len(files) >= 5
    for f in files:
        cfg = load_run_config(f)
        assert cfg.benchmark.name == "prefeval"
        if cfg.benchmark.task == "gen" and cfg.benchmark.evaluate:
            assert cfg.judge is not None, f"{f.name}: the generation task needs a judge engine"
