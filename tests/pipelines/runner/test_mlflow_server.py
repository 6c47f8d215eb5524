"""A real `mlflow server` on 127.0.0.1 receives a run and answers its REST API."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import requests

from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from tests.pipelines.conftest import config

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def mlflow_server(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                             f"sqlite:///{tmp_path}/server.db", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow server did not start within 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_run_logged_to_server(tmp_path, data_root, local_ray, mlflow_server):
    cfg = load_run_config(config(tmp_path, forms=["choice"], turns=[0], methods=["zero-shot"]),
                          [f"tracking.uri={mlflow_server}", "tracking.experiment=server-test"])
    out = run_evaluation(cfg, data_root)
    exp = requests.get(f"{mlflow_server}/api/2.0/mlflow/experiments/get-by-name",
                       params={"experiment_name": "server-test"}, timeout=10).json()["experiment"]
    found = requests.post(f"{mlflow_server}/api/2.0/mlflow/runs/search",
                          json={"experiment_ids": [exp["experiment_id"]]}, timeout=10).json()["runs"]
    run = next(r for r in found if r["info"]["run_id"] == out.mlflow_run_id)
    metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
    assert metrics["accuracy"] == pytest.approx(out.metrics["accuracy"])
    params = {p["key"]: p["value"] for p in run["data"]["params"]}
    assert params["benchmark.name"] == "prefeval" and params["engine.type"] == "fake"
