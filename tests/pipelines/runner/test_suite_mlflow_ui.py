"""A suite logged to a real `mlflow server` on 127.0.0.1: readable run names, real start/end times,
the subject parents' `<entry>.<metric>` columns, and the runs table as headless Chromium renders it
(entries and settings nested under their subject's parent run)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import requests

from llmrec import tracking
from llmrec.pipelines.runner.suite import run_suite
from llmrec.pipelines.runner.suite_config import load_suite_config
from tests.pipelines.runner.test_mlflow_server import mlflow_server  # noqa: F401 - the fixture
from tests.pipelines.runner.test_suite import suite_file

pytestmark = pytest.mark.slow

CHROMIUM = ("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1600,1000", "--virtual-time-budget=20000")


def search(server: str, exp_id: str) -> dict[str, dict]:
    runs = requests.post(f"{server}/api/2.0/mlflow/runs/search", json={"experiment_ids": [exp_id]},
                         timeout=30).json()["runs"]
    return {r["info"]["run_name"]: r for r in runs}


def test_suite_runs_in_the_mlflow_ui(tmp_path, local_ray, mlflow_server):  # noqa: F811 - the fixture
    cfg = load_suite_config(suite_file(tmp_path), [f"tracking.uri={mlflow_server}",
                                                   f"tracking.artifact_root={tmp_path / 'art'}"])
    out = run_suite(cfg)
    exp = requests.get(f"{mlflow_server}/api/2.0/mlflow/experiments/get-by-name",
                       params={"experiment_name": "s1"}, timeout=30).json()["experiment"]
    runs = search(mlflow_server, exp["experiment_id"])
    assert {"s1 · a", "s1 · b", "a · t1", "b · t3", "a · t1 · kind=odd"} <= set(runs)
    assert not [n for n in runs if "toy-" in n or "[" in n]  # no config hash in any name
    parent = runs["s1 · a"]
    metrics = {m["key"]: m["value"] for m in parent["data"]["metrics"]}
    assert metrics["t1.accuracy"] == 1.0 and metrics["t3.accuracy"] == 1.0 and "time_engine_start_s" in metrics
    child = runs["a · t2"]
    tags = {t["key"]: t["value"] for t in child["data"]["tags"]}
    assert tags["mlflow.parentRunId"] == parent["info"]["run_id"] and len(tags["llmrec.config_hash"]) == 12
    setting = {t["key"]: t["value"] for t in runs["a · t2 · kind=odd"]["data"]["tags"]}
    assert setting["mlflow.parentRunId"] == child["info"]["run_id"]  # subject → entry → setting
    # real wall clock: a child lasts as long as its run did (plan → stream → files → MLflow), not ~0.1 s
    span = int(child["info"]["end_time"]) - int(child["info"]["start_time"])
    assert span >= 1000, span
    p_info = parent["info"]
    assert int(p_info["start_time"]) <= int(child["info"]["start_time"]) and \
        int(child["info"]["end_time"]) <= int(p_info["end_time"])
    assert out.metrics[("b", "t1")]["accuracy"] == 0.0

    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (apt-get install chromium): the runs-table screenshot is not taken")
    url = tracking.ui_url(mlflow_server, exp["experiment_id"])
    shot = tmp_path / "runs_table.png"  # LLMREC_KEEP_SCREENSHOT=DIR keeps a copy to look at
    subprocess.run([*CHROMIUM, f"--screenshot={shot}", url], check=True, capture_output=True, timeout=180)
    assert shot.stat().st_size > 10_000  # a rendered page, not an empty frame
    if os.environ.get("LLMREC_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["LLMREC_KEEP_SCREENSHOT"])
    dom = subprocess.run([*CHROMIUM, "--dump-dom", url], check=True, capture_output=True, text=True,
                         timeout=180).stdout
    for name in ("s1 · a", "s1 · b"):  # the subject parents, each with the expander that unfolds its entries
        cell = dom[:dom.index(f">{name}</span>")].rsplit('col-id="attributes.`Run Name`"', 1)[1]
        assert "runnamecellrenderer" in cell and "<button" in cell, f"{name!r} has no expander: runs listed flat"
    # nested, the entries and settings stay folded under their parent: not rows of their own (a table sorted by
    # a metric would list all of them flat, mlflow/mlflow#15802)
    assert not [n for n in runs if " · t" in n and f">{n}</span>" in dom]
    assert "t1.accuracy" in dom  # the subject × benchmark column
