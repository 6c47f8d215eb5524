"""`llmrec baseline pin` / `list` and `llmrec gate` on PrefEval MCQ run directories answered by the fake engine
(the worker without Ray, the directory written as `llmrec run` writes it), in-process through typer's CliRunner:
an equal candidate passes (exit 0), a worse one is a regression (its own exit code), both write the Markdown
summary and the JUnit report (these two talk to an MLflow store: integration tier). On the gate itself (unit tier):
a protocol difference is refused by name unless allowed; a pinned run that changed is refused; Holm and too few
clusters decide rows."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from llmrec.config import dump_yaml
from llmrec.errors import EXIT_INCONCLUSIVE, EXIT_REGRESSION, EXIT_USAGE, ConfigError
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.parts import attach_assets
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from llmrec.pipelines.results.gate import markdown
from tests.conftest import require_data

runner = CliRunner()
BENCH = {"name": "prefeval", "task": "mcq", "topics": ["travel_restaurant"], "forms": ["explicit"], "turns": [2],
         "methods": ["zero-shot"], "per_topic": 12}
WRONG = {"A": "B", "B": "C", "C": "D", "D": "A"}


@pytest.fixture(autouse=True, scope="module")
def verbs():
    if not any(c.name == "gate" for c in app.registered_commands):
        _mount_extra_verbs()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One MLflow store for the module (creating one costs seconds)."""
    return f"sqlite:///{tmp_path_factory.mktemp('store')}/mlruns.db"


@pytest.fixture(scope="module")
def data():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


_ASSETS: dict = {}


def assets(bench_cfg, data):
    """The benchmark's assets, loaded once per config (loading them is most of a fake run's time)."""
    key = (bench_cfg.model_dump_json(), str(data))
    if key not in _ASSETS:
        _ASSETS[key] = get_benchmark("prefeval").assets(bench_cfg, data)
    return _ASSETS[key]


def prefeval_run(tmp_path, data, name: str, wrong: int = 0, **bench) -> str:
    """A PrefEval MCQ run directory: the fake engine picks the gold option of every question but the first
    ``wrong`` ones (there it picks another)."""
    cfg_bench = {**BENCH, **bench}
    bench_cfg = benchmark_config(cfg_bench)
    bench = get_benchmark("prefeval")
    samples = attach_assets(bench.build_samples(bench_cfg, data), assets(bench_cfg, data))
    rules = [{"contains": s["question"], "reply": f"<choice>{WRONG[s['gold']] if i < wrong else s['gold']}</choice>"}
             for i, s in enumerate(samples)]
    engine = {"type": "fake", "model": name, "rules": rules}
    cfg = RunConfig.model_validate({"benchmark": cfg_bench, "engine": engine, "data": {"dir": str(data)},
                                    "output": {"dir": str(tmp_path / "runs"), "run_name": name},
                                    "tracking": {"enabled": False}})
    eng = build_engine(engine)
    rows = process_samples(bench, bench_cfg, samples, lambda role: eng, retries=1, backoff_s=0.0)
    d = tmp_path / "runs" / name
    ResultStore(d / "results").write(rows)
    (d / "resolved.yaml").write_text(dump_yaml(cfg))
    return str(d)


def invoke(args: list[str], store: str):
    return runner.invoke(app, args + ["--tracking-uri", store], env={"COLUMNS": "200"})


@pytest.mark.integration  # an MLflow store (the pins' home): its first creation takes seconds
def test_pin_then_gate_an_equal_and_a_worse_candidate(tmp_path, data, store):
    base = prefeval_run(tmp_path, data, "shipped")
    res = invoke(["baseline", "pin", base, "--name", "prod"], store)
    assert res.exit_code == 0, res.output
    assert "pinned prod" in res.output
    res = invoke(["baseline", "list"], store)
    assert res.exit_code == 0 and "prod" in res.output and "shipped" in res.output, res.output

    equal = prefeval_run(tmp_path, data, "candidate-equal")
    md, xml = tmp_path / "out" / "gate.md", tmp_path / "out" / "gate.xml"
    res = invoke(["gate", equal, "--against", "prod", "--metric", "accuracy", "--margin", "0.1",
                  "--markdown", str(md), "--junit", str(xml)], store)
    assert res.exit_code == 0, res.output
    assert "gate: pass" in res.output
    text = md.read_text()
    assert "✅ pass" in text and "metric accuracy" in text and "margin 0.1" in text
    assert "| prefeval/mcq" in text or "| prefeval" in text
    row = [ln for ln in text.splitlines() if "task=mcq" in ln][0].split("|")
    assert [c.strip() for c in row[3:5]] == ["12", "12"]  # n, clusters
    assert "+0.0000" in row[7] and "[+0.0000, +0.0000]" in row[8]  # estimate, CI
    suite = ET.parse(xml).getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["metric"] == "accuracy" and props["margin"] == "0.1" and props["verdict"] == "pass"
    out = next(suite.iter("system-out")).text
    assert "estimate +0.0000" in out and "n 12, clusters 12" in out and "CI [" in out

    worse = prefeval_run(tmp_path, data, "candidate-worse", wrong=8)
    res = invoke(["gate", worse, "--against", "prod", "--metric", "accuracy", "--margin", "0.1",
                  "--markdown", str(md), "--junit", str(xml)], store)
    assert res.exit_code == EXIT_REGRESSION, res.output
    assert "gate: regression" in res.output
    assert "❌ regression" in md.read_text() and "-0.6667" in md.read_text()
    suite = ET.parse(xml).getroot()
    assert suite.get("failures") == "1"
    failure = next(suite.iter("failure"))
    assert failure.get("type") == "regression" and "estimate -0.6667" in failure.get("message")

    # a little worse, within reach of the margin either way: not enough evidence on 12 clusters
    res = invoke(["gate", prefeval_run(tmp_path, data, "candidate-slightly", wrong=1), "--against", "prod",
                  "--metric", "accuracy", "--margin", "0.1", "--junit", str(xml)], store)
    assert res.exit_code == EXIT_INCONCLUSIVE, res.output
    assert next(ET.parse(xml).getroot().iter("skipped")) is not None

    # lower is better (the miss rate, 0 for both): not worse
    res = invoke(["gate", equal, "--against", "prod", "--metric", "missed_rate", "--margin", "0.05",
                  "--lower-is-better"], store)
    assert res.exit_code == 0, res.output


@pytest.mark.integration
def test_the_pin_store_lists_the_newest_pin_of_a_name_and_names_missing_ones(tmp_path, data, store):
    base = prefeval_run(tmp_path, data, "shipped")
    assert invoke(["baseline", "pin", base, "--name", "main"], store).exit_code == 0
    moved = prefeval_run(tmp_path, data, "next")
    assert invoke(["baseline", "pin", moved, "--name", "main"], store).exit_code == 0
    res = invoke(["baseline", "list"], store)
    main_line = [ln for ln in res.output.splitlines() if ln.strip("│ ").startswith("main")]
    assert len(main_line) == 1 and "next" in main_line[0], res.output
    res = invoke(["gate", base, "--against", "nope", "--metric", "accuracy", "--margin", "0.1"], store)
    msg = " ".join(res.output.split())
    assert res.exit_code == EXIT_USAGE and "no baseline pinned as 'nope'" in msg and "main" in msg, res.output
    res = invoke(["baseline", "pin", base, "--name", "no/slash"], store)
    assert res.exit_code == EXIT_USAGE and "pin name" in res.output


def test_protocol_differences_and_changed_pins_are_refused(tmp_path, data):
    from llmrec.pipelines.results.gate import PASS, run_gate
    from llmrec.pipelines.results.pins import describe

    base = prefeval_run(tmp_path, data, "shipped")
    pin = describe(base, "main")
    other = prefeval_run(tmp_path, data, "constrained", constrain_choice=True)
    with pytest.raises(ConfigError, match=r"protocol differs .*constrain_choice.*--allow-protocol-difference"):
        run_gate(other, pin, "accuracy", 0.1)
    gate = run_gate(other, pin, "accuracy", 0.1, allow_protocol_difference=True)
    assert gate.verdict == PASS and any("constrain_choice" in d["key"] for d in gate.protocol_diff)
    assert "Protocols differ (allowed)" in markdown(gate)
    with pytest.raises(ConfigError, match="metrics with outcomes: accuracy, missed_rate"):
        run_gate(base, pin, "ndcg", 0.1)
    prefeval_run(tmp_path, data, "shipped", per_topic=11)  # the pinned directory re-run with another config
    with pytest.raises(ConfigError, match="is not the run pinned"):
        run_gate(base, pin, "accuracy", 0.1)


def test_the_gate_decides_pass_regression_and_too_few_clusters(tmp_path, data):
    from llmrec.pipelines.results.gate import INCONCLUSIVE, PASS, REGRESSION, junit, run_gate
    from llmrec.pipelines.results.pins import describe

    pin = describe(prefeval_run(tmp_path, data, "shipped"), "main")
    equal = run_gate(prefeval_run(tmp_path, data, "same"), pin, "accuracy", 0.1, resamples=1000)
    assert equal.verdict == PASS and equal.exit_code == 0
    worse = run_gate(prefeval_run(tmp_path, data, "worse", wrong=8), pin, "accuracy", 0.1, resamples=1000)
    assert worse.verdict == REGRESSION and worse.exit_code == EXIT_REGRESSION
    (row,) = worse.rows
    assert row.estimate == pytest.approx(-8 / 12) and row.ci_high < -0.1 and row.p_worse_holm <= 0.05
    assert ET.fromstring(junit(worse).split("\n", 1)[1]).get("failures") == "1"
    few_pin = describe(prefeval_run(tmp_path / "few", data, "shipped", per_topic=8), "few")
    few = run_gate(prefeval_run(tmp_path / "few", data, "same", per_topic=8), few_pin, "accuracy", 0.1)
    assert few.verdict == INCONCLUSIVE and few.exit_code == EXIT_INCONCLUSIVE
    assert "fewer than 10 clusters" in few.rows[0].note and "skipped" in junit(few)


def test_holm_adjusts_both_families():
    from llmrec.pipelines.results.gate import gate_row

    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 400).astype(float)
    row = gate_row("e", "s", "accuracy", "mean", a, a, np.arange(400), 0.05, 0.05, False, 2000, 0)
    assert row.p_not_worse < 0.001 and row.p_worse == 1.0 and row.ci_low == row.ci_high == 0
    flipped = gate_row("e", "s", "miss", "mean", a, a + 0.2, np.arange(400), 0.05, 0.05, True, 2000, 0)
    assert flipped.estimate == pytest.approx(-0.2) and flipped.p_worse < 0.001  # lower is better: more is worse


@pytest.mark.integration  # a moto S3 server and an MLflow store
def test_a_candidate_on_s3_is_gated_like_a_local_one(tmp_path, data, store):
    from tests.pipelines.runner.test_results_on_s3 import _upload
    from tests.runtime.helpers import s3_server

    base = prefeval_run(tmp_path, data, "shipped-s3")
    assert invoke(["baseline", "pin", base, "--name", "prod-s3"], store).exit_code == 0
    with s3_server() as bucket:
        equal = _upload(Path(prefeval_run(tmp_path, data, "equal-s3")), bucket, "runs/equal")
        worse = _upload(Path(prefeval_run(tmp_path, data, "worse-s3", wrong=8)), bucket, "runs/worse")
        res = invoke(["gate", equal, "--against", "prod-s3", "--metric", "accuracy", "--margin", "0.1"], store)
        assert res.exit_code == 0 and "gate: pass" in res.output, res.output
        res = invoke(["gate", worse, "--against", "prod-s3", "--metric", "accuracy", "--margin", "0.1"], store)
        assert res.exit_code == EXIT_REGRESSION and "gate: regression" in res.output, res.output


@pytest.mark.integration  # a moto S3 server
def test_a_stored_run_on_s3_reads_its_result_store(tmp_path, data):
    from llmrec.pipelines.results.stored import open_run
    from tests.pipelines.runner.test_results_on_s3 import _upload
    from tests.runtime.helpers import s3_server

    local = prefeval_run(tmp_path, data, "rows-s3", wrong=3)
    with s3_server() as bucket:
        uri = _upload(Path(local), bucket, "runs/rows")
        remote = sorted(open_run(uri).rows, key=lambda r: r["sample_id"])
    assert [r["output"] for r in remote] == [r["output"] for r in sorted(open_run(local).rows,
                                                                       key=lambda r: r["sample_id"])]
