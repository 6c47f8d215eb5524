"""`llmrec submit` against a real Ray head (`ray start --head` on 127.0.0.1, dashboard + Jobs API),
logging to a real `mlflow server` whose artifacts go to a real S3 API (moto server).

Two jobs with different settings land side by side in one experiment, their artifacts in the
bucket; `llmrec jobs list|status|logs|stop` see them; a job whose named variable is not set on
the cluster fails before any work, naming it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.cluster.servers import auth_env, mlflow_server, moto_s3, ray_head, s3_keys
from tests.pipelines.conftest import config, data_root  # noqa: F401 - data_root is a fixture

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

LLMREC = str(Path(sys.executable).parent / "llmrec")
BUCKET = "mlflow"
EXPERIMENT = "cluster-test"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, data_root):
    """(jobs url, mlflow url, s3 endpoint, client env): one head + one MLflow server + S3 for the module."""
    tmp = tmp_path_factory.mktemp("cluster")
    auth = auth_env()
    with moto_s3(tmp, BUCKET) as s3, mlflow_server(tmp, s3, f"s3://{BUCKET}/artifacts") as mlflow_url, \
            ray_head(tmp, {"LLMREC_DATA_DIR": str(data_root), **auth}, num_cpus=4) as jobs_url:
        env = {**os.environ, **auth, "RAY_ADDRESS": jobs_url}
        env.pop("MLFLOW_TRACKING_URI", None)
        yield jobs_url, mlflow_url, s3, env


def llmrec(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([LLMREC, *args], env=env, capture_output=True, text=True, timeout=timeout)


def job_id_of(out: subprocess.CompletedProcess) -> str:
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("submitted "))
    return line.split()[1]


def server_runs(mlflow_url: str) -> list[dict]:
    exp = requests.get(f"{mlflow_url}/api/2.0/mlflow/experiments/get-by-name",
                       params={"experiment_name": EXPERIMENT}, timeout=10).json()["experiment"]
    found = requests.post(f"{mlflow_url}/api/2.0/mlflow/runs/search",
                          json={"experiment_ids": [exp["experiment_id"]], "max_results": 100}, timeout=10).json()
    return [r for r in found.get("runs", []) if "mlflow.parentRunId" not in {t["key"] for t in r["data"]["tags"]}]


def test_two_jobs_compare_in_one_experiment(cluster, tmp_path):
    jobs_url, mlflow_url, s3, env = cluster
    cfg = config(tmp_path, forms=["choice"], methods=["zero-shot"])
    common = ["--set", f"tracking.uri={mlflow_url}", "--set", f"tracking.experiment={EXPERIMENT}"]
    t0 = time.monotonic()
    second = llmrec(env, "submit", str(cfg), *common, "--set", "benchmark.turns=[2]")  # runs beside the first
    assert second.returncode == 0, second.stdout + second.stderr
    first = llmrec(env, "submit", str(cfg), *common, "--set", "benchmark.turns=[0]", "--follow")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "job finished: SUCCEEDED" in first.stdout and "results:" in first.stdout  # the followed log
    waited = llmrec(env, "jobs", "logs", job_id_of(second), "--follow")
    assert waited.returncode == 0 and "job finished: SUCCEEDED" in waited.stdout, waited.stdout + waited.stderr
    elapsed = time.monotonic() - t0

    run_dirs = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert len(run_dirs) == 2  # different settings → different run directories, written by the jobs
    for d in run_dirs:
        assert (d / "metrics.json").is_file() and (d / "resolved.yaml").is_file()
    runs = server_runs(mlflow_url)
    assert len(runs) == 2
    turns = sorted(next(p["value"] for p in r["data"]["params"] if p["key"] == "benchmark.turns") for r in runs)
    assert turns == ["[0]", "[2]"]
    assert all(any(m["key"] == "accuracy" for m in r["data"]["metrics"]) for r in runs)
    keys = s3_keys(s3, BUCKET)
    for r in runs:
        assert r["info"]["artifact_uri"].startswith("mlflow-artifacts:")
        assert any(r["info"]["run_id"] in k and k.endswith("metrics.json") for k in keys), keys[:20]

    listed = llmrec(env, "jobs", "list")
    assert job_id_of(first) in listed.stdout and job_id_of(second) in listed.stdout and "SUCCEEDED" in listed.stdout
    status = llmrec(env, "jobs", "status", job_id_of(second))
    assert "SUCCEEDED" in status.stdout and f"llmrec.tracking_uri: {mlflow_url}" in status.stdout
    logs = llmrec(env, "jobs", "logs", job_id_of(second))
    assert "llmrec package:" in logs.stdout and "results:" in logs.stdout
    print(f"two submitted fake-engine jobs: {elapsed:.1f} s")


def job_status(jobs_url: str, env: dict, job_id: str) -> str:
    """A job's status from the Jobs REST API (the test's own wait; what llmrec prints is checked with llmrec)."""
    got = requests.get(f"{jobs_url}/api/jobs/{job_id}", timeout=10,
                       headers={"Authorization": f"Bearer {env['RAY_AUTH_TOKEN']}"})
    got.raise_for_status()
    return got.json()["status"]


def test_missing_secret_fails_by_name_and_stop(cluster, tmp_path):
    jobs_url, _, _, env = cluster
    cfg = config(tmp_path, forms=["choice"], turns=[0], methods=["zero-shot"])
    env = {**env, "LLMREC_TEST_SECRET": "value-on-the-submitter-only"}
    out = llmrec(env, "submit", str(cfg), "--env", "LLMREC_TEST_SECRET", "--wait")
    assert out.returncode == 1 and "FAILED" in out.stdout
    logs = llmrec(env, "jobs", "logs", job_id_of(out)).stdout
    assert "LLMREC_TEST_SECRET" in logs and "value-on-the-submitter-only" not in logs
    assert not (tmp_path / "runs").exists()  # failed before any work

    slow = llmrec(env, "submit", str(cfg), "--set", "engine.delay_s=30")
    job = job_id_of(slow)
    assert llmrec(env, "jobs", "stop", job).returncode == 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and job_status(jobs_url, env, job) != "STOPPED":
        time.sleep(1)
    assert "STOPPED" in llmrec(env, "jobs", "status", job).stdout


def test_cluster_without_dependencies_says_which_and_how_to_fix(tmp_path):
    """A head whose Python lacks llmrec's dependencies (a bare venv's `python` runs the job): `submit --wait`
    prints the tail of the job's log, which names the missing packages and the fix, not only FAILED."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    auth = auth_env()
    with ray_head(tmp_path, auth, num_cpus=1, job_python=bare / "bin") as jobs_url:
        env = {**os.environ, **auth, "RAY_ADDRESS": jobs_url}
        cfg = config(tmp_path, forms=["choice"], turns=[0], methods=["zero-shot"])
        out = llmrec(env, "submit", str(cfg), "--wait")
    assert out.returncode == 1 and "job finished: FAILED" in out.stdout, out.stdout + out.stderr
    assert "last " in out.stderr and "lines of the job's log" in out.stderr
    assert "lacks" in out.stderr and "platformdirs==" in out.stderr and "--deps pip" in out.stderr, out.stderr
    assert "ModuleNotFoundError" not in out.stderr
