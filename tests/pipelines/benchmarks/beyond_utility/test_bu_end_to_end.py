"""The demo slice through `llmrec run` with the embedded model, then baselines on the SAME candidates
scored by the same task into the same MLflow experiment, and `llmrec runs` listing both kinds. Every verb runs
through typer's runner in this process, the run on the tests' shared local Ray."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from tests.conftest import REPO, require_data

pytestmark = [pytest.mark.slow, pytest.mark.model]
pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'cpu') is not installed")


def llmrec(*args: str, cwd: Path):
    """`llmrec ARGS` run in ``cwd``, in this process."""
    if not any(g.name == "baselines" for g in app.registered_groups):
        _mount_extra_verbs()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(app, list(args))
    finally:
        os.chdir(here)
    assert res.exit_code == 0, (res.output[-3000:], res.exception)
    return res


def store(work: Path) -> str:
    return f"sqlite:///{work / 'mlruns.db'}"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, local_ray):
    data = require_data("ml-100k", "u.data").parents[1]
    require_data("evallmasrecommender", "eva", "templates", "template.txt")
    work = tmp_path_factory.mktemp("bu-e2e")
    cfg = yaml.safe_load((REPO / "configs" / "beyond_utility_demo.yaml").read_text())
    cfg["benchmark"]["users"]["n_users"] = 2
    cfg["data"] = {"dir": str(data)}
    # one MLflow store for the module, named absolutely (MLflow keeps a store per URI in this process)
    cfg["tracking"].update(uri=store(work), artifact_root=str(work / "mlartifacts"))
    (work / "demo.yaml").write_text(yaml.safe_dump(cfg))
    llmrec("run", "demo.yaml", cwd=work)
    run_dir = next((work / "runs").glob("beyond_utility-*"))
    return work, run_dir, data


def test_demo_run_writes_the_contract_files(demo):
    work, run_dir, _ = demo
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n_users"] == 2 and 0 <= metrics["compliance"] <= 1
    setting = next((run_dir / "predictions").glob("*.jsonl"))
    res = llmrec("score", "beyond-utility", "--predictions", str(setting), "--items", str(run_dir / "items.jsonl"),
                 "--k", "5", "--out", "m.json", cwd=work)
    scored = json.loads((work / "m.json").read_text())["metrics"]
    for k in ("hr", "ndcg", "arp", "hallucination", "item_coverage", "gini"):
        assert scored[k] == pytest.approx(metrics[k]), k
    assert (run_dir / "plots" / "position_bias.png").is_file() and (run_dir / "candidates.jsonl").is_file()
    assert res.exit_code == 0


def test_baselines_on_the_same_candidates_share_the_experiment(demo):
    work, run_dir, data = demo
    cfg = yaml.safe_load((REPO / "configs" / "beyond_utility_baselines.yaml").read_text())
    cfg.update(candidates=str(run_dir / "candidates.jsonl"), out=str(work / "bl"),
               score_options={"items": str(run_dir / "items.jsonl"), "k": 5})
    cfg["base"]["data"]["dir"] = str(data)
    cfg["base"]["train"]["epochs"] = 1
    cfg["base"]["output"]["dir"] = str(work / "trained")
    cfg["pool"]["out"] = "pool.jsonl"
    cfg["tracking"].update(uri=store(work), artifact_root=str(work / "mlartifacts"))
    cfg["base"]["tracking"]["uri"] = store(work)
    (work / "bl.yaml").write_text(yaml.safe_dump(cfg))
    out = json.loads(llmrec("baselines", "rank", "bl.yaml", cwd=work).stdout)
    assert set(out) == {"mostpop", "bm25", "bprmf"}
    assert out["mostpop"]["serendipity"] == 0.0  # MostPop's hits are never serendipitous
    assert all(v["hallucination"] == 0.0 for v in out.values())
    first = [json.loads(x) for x in (work / "bl" / "predictions_bprmf.jsonl").read_text().splitlines()]
    cands = [json.loads(x) for x in (run_dir / "candidates.jsonl").read_text().splitlines()]
    assert [p["candidates"] for p in first] == [c["ids"] for c in cands]  # the same candidates, same order
    pool = [json.loads(x) for x in (work / "bl" / "pool.jsonl").read_text().splitlines()]
    assert all(len(p["candidates"]) == 20 == len(set(p["candidates"])) for p in pool)
    table = llmrec("runs", "--experiment", "beyond-utility", "--metric", "hr", "--metric", "ndcg",
                   "--tracking-uri", store(work), cwd=work).stdout
    # the LLM run is named <benchmark> · <model>
    assert "baseline-bprmf" in table and "baseline-mostpop" in table and "beyond_utility · " in table
