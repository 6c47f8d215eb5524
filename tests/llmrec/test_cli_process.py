"""`llmrec run` as a user starts it: the console script in its own process, with its own local Ray.

What a plain run prints carries no Ray error or warning the user did not cause (Ray's core-worker `E` line
about actor constructor arguments, RayDeprecationWarning, the token-auth notice) and none of its processes outlives
it; a run killed with kill -9 leaves no Ray process behind once the next run has started. Each run is a process of
its own: what it prints on its own console, and which processes it leaves, is what is checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from tests.conftest import REPO
from tests.pipelines.runner.test_run_leaves_no_process import gone_soon, new_tag, run_env
from tests.pipelines.toy.benchmark import NAME

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # each test starts Ray in a new process (20-60 s on a busy 2-core machine)

LLMREC = str(Path(sys.executable).with_name("llmrec"))
# Ray's native log lines ("[2026-11-26 01:09:45,167 E 32382 32382] core_worker.cc:2465: ...") and warnings
NATIVE_LOG = re.compile(r"^\[[\d\- :,]+ [EWF] \d+ \d+\]", re.MULTILINE)
WARNINGS = re.compile(r"warn|deprecat|token auth|constructor arguments", re.IGNORECASE)


def write_config(tmp_path: Path, name: str, n: int, delay_s: float = 0.0, tracking: bool = True) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "benchmark": {"name": NAME, "n": n, "rounds": 0},
        "engine": {"type": "fake", "default": "yes", "delay_s": delay_s},
        "execution": {"batch_size": 2, "concurrency": 1},
        "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs"), "run_name": name},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")}
        if tracking else {"enabled": False}}))
    return path


def env(tmp_path: Path) -> dict:
    # the toy benchmark is imported from the checkout; session records go to the test's own cache folder
    return {**os.environ, "PYTHONPATH": str(REPO), "LLMREC_CACHE_DIR": str(tmp_path / "cache")}


def run(tmp_path: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([LLMREC, "run", str(config)], env=env(tmp_path), capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def test_a_plain_run_prints_no_ray_errors_or_warnings(tmp_path):
    """A run as a user starts it (MLflow on): nothing alarming printed, and none of its processes (its local Ray's
    GCS, raylet, agents, map actors) runs on a few seconds after it ended."""
    tag, temp = new_tag()
    out = subprocess.run([LLMREC, "run", str(write_config(tmp_path, "plain", n=4))], env=run_env(tmp_path, tag, temp),
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "accuracy" in out.stdout
    printed = out.stdout + out.stderr
    assert not NATIVE_LOG.search(printed), printed
    assert not WARNINGS.search(printed), printed
    assert gone_soon(tag, temp) == []


def stamps(procs) -> dict[tuple[int, float], str]:
    out = {}
    for p in procs:
        try:
            out[(p.pid, p.create_time())] = p.name()
        except psutil.Error:
            continue
    return out


def still_running(known: dict[tuple[int, float], str]) -> list[str]:
    alive = []
    for (pid, started), name in known.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{pid} {name}")
        except psutil.Error:
            continue
    return alive


def test_a_killed_runs_ray_processes_are_gone_after_the_next_run_starts(tmp_path):
    """kill -9 of the driver mid-run: Ray ends the GCS and raylet, but the raylet's DashboardAgent and
    RuntimeEnvAgent linger (a minute or more, ignoring SIGTERM). The next `llmrec run` stops them."""
    # MLflow off: a local sqlite store starts no process
    slow = subprocess.Popen([LLMREC, "run", str(write_config(tmp_path, "slow", n=40, delay_s=1.0, tracking=False))],
                            env=env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    driver = psutil.Process(slow.pid)
    record = tmp_path / "cache" / "ray-local" / f"{slow.pid}.json"
    deadline = time.monotonic() + 300
    while not (record.exists() and any("StageWorker" in n for n in stamps(driver.children(recursive=True)).values())):
        assert slow.poll() is None and time.monotonic() < deadline, "the run did not reach its stage workers"
        time.sleep(1)
    session = stamps(driver.children(recursive=True))
    names = " ".join(session.values())
    assert all(n in names for n in ("raylet", "gcs_server", "DashboardAgent", "RuntimeEnvAgent")), names
    slow.kill()
    slow.wait()
    out = run(tmp_path, write_config(tmp_path, "next", n=2, tracking=False))
    assert out.returncode == 0, out.stderr
    assert not still_running(session), still_running(session)
    assert not record.exists()
