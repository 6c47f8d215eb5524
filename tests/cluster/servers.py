"""Real servers on 127.0.0.1 for the cluster tests: a Ray head (with the Jobs API), moto (S3), mlflow.

Every port is asked from the OS; every process is started in its own session and stopped by
killing that process group only (never `ray stop`: other Ray instances may share the machine).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import requests

BIN = Path(sys.executable).parent
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen, log: Path, ok: tuple = (200,)) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if requests.get(url, timeout=2).status_code in ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def stop_group(proc: subprocess.Popen, grace_s: float = 20) -> None:
    """SIGTERM then SIGKILL the process group this test started (its own session)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def auth_env() -> dict[str, str]:
    """Ray's token authentication with a token of this test's own (not the shared ~/.ray/auth_token).

    Set in both the head's environment and the submitting process (``monkeypatch``), as on a real
    cluster where the submitter holds the cluster's token.
    """
    import secrets

    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


# what keeps `ray start --head --node-ip-address=127.0.0.1` on the loopback (docs/cluster.md, section 1): without it
# Ray takes the node for a cluster node, replaces 127.0.0.1 by the machine's outward address and listens there
LOOPBACK_HEAD_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@contextmanager
def ray_head(tmp: Path, env: dict[str, str], num_cpus: int = 2, job_python: Path = BIN):
    """`ray start --head --block` on 127.0.0.1 with the dashboard; yields the Jobs API URL.

    ``env`` is the environment the cluster's processes (and so every job) see: the place where
    a real cluster has its secrets (the Ray token included) and data locations. ``job_python`` is the
    folder whose ``python`` a job's entrypoint runs (first on the cluster's PATH; Ray itself runs on
    this venv's, started by absolute path).
    """
    dash = free_port()
    temp = Path(f"/tmp/ray-t{os.getpid()}-{dash}")  # short: Ray's unix socket paths are length-limited
    ports = {"--port": free_port(), "--dashboard-port": dash, "--ray-client-server-port": free_port(),
             "--dashboard-agent-listen-port": free_port(), "--dashboard-agent-grpc-port": free_port(),
             "--runtime-env-agent-port": free_port(), "--metrics-export-port": free_port(),
             "--node-manager-port": free_port(), "--object-manager-port": free_port()}
    cmd = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
           "--dashboard-host=127.0.0.1", "--include-dashboard=true", f"--num-cpus={num_cpus}",
           f"--temp-dir={temp}", "--disable-usage-stats"] + [f"{k}={v}" for k, v in ports.items()]
    log = tmp / "ray-head.log"
    path = f"{job_python}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # the cluster's `python`
    # RAY_memory_monitor_refresh_ms=0: Ray's OOM killer measures the whole machine, and on a shared test
    # machine other people's processes would get this head's workers killed
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **env, "PATH": path, "RAY_USAGE_STATS_ENABLED": "0",
                                 "RAY_memory_monitor_refresh_ms": "0", **LOOPBACK_HEAD_ENV})
    url = f"http://127.0.0.1:{dash}"
    try:
        wait_http(f"{url}/api/version", 180, proc, log, ok=(200, 401))  # 401: up, token auth on
        yield url
    finally:
        # `ray start --block` answers SIGTERM by stopping each of its processes in turn, which took 20-30 s on 2
        # busy cores; the group (every process of this head: it started in its own session) is killed after 3 s
        stop_group(proc, grace_s=3)
        shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def moto_s3(tmp: Path, bucket: str):
    """moto in server mode (a real S3 HTTP API) with one bucket; yields the endpoint URL."""
    import boto3

    port = free_port()
    log = tmp / "moto.log"
    proc = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **S3_ENV})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/moto-api/", 60, proc, log)
        boto3.client("s3", endpoint_url=url, **_creds()).create_bucket(Bucket=bucket)
        yield url
    finally:
        stop_group(proc)


def _creds() -> dict:
    return {"aws_access_key_id": S3_ENV["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": S3_ENV["AWS_SECRET_ACCESS_KEY"],
            "region_name": S3_ENV["AWS_DEFAULT_REGION"]}


def s3_keys(endpoint: str, bucket: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, **_creds())
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


@contextmanager
def mlflow_server(tmp: Path, s3_endpoint: str, destination: str):
    """`mlflow server`: sqlite backend, artifacts proxied (--serve-artifacts) to an S3 destination."""
    port = free_port()
    log = tmp / "mlflow.log"
    cmd = [str(BIN / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{tmp}/mlflow.db",
           "--serve-artifacts", "--artifacts-destination", destination,
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    env = {**os.environ, **S3_ENV, "MLFLOW_S3_ENDPOINT_URL": s3_endpoint}
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/health", 120, proc, log)
        yield url
    finally:
        stop_group(proc)
