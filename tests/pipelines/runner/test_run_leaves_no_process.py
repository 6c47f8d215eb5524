"""When an `llmrec run` ends, however it ends, none of its processes outlives it: its local Ray's GCS, raylet, agents
and workers (the map actors holding the engines) are gone a few seconds after the driver, after a budget stop, SIGTERM
and SIGKILL of the driver (a normal end: the plain run of tests/llmrec/test_cli_process.py). The fake engine on the toy
benchmark, one Ray start per case: each case is a process of its own, since what is checked is what outlives it.
MLflow is off (a local sqlite store starts no process).

A run's processes are found by what they inherited from the driver: an environment variable of this test's own (the
workers the raylet starts carry it too), or this run's Ray temp folder in their command line (Ray's agents)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.pipelines.toy.benchmark import NAME

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # Ray started and ended in child processes, four ways

LLMREC = str(Path(sys.executable).parent / "llmrec")
TAG = "LLMREC_TEST_RUN_TAG"


def _theirs(tag: str, temp: str) -> list[str]:
    """``pid name`` of each process that carries ``tag`` or names ``temp`` (not zombies)."""
    import psutil

    out = []
    for proc in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if f"{TAG}={tag}".encode() in env or temp in " ".join(proc.info["cmdline"] or []):
            out.append(f"{proc.pid} {proc.info['name']}")
    return out


def run_env(tmp_path: Path, tag: str, temp: str) -> dict:
    """The environment of a run whose processes ``_theirs(tag, temp)`` finds."""
    env = {**os.environ, TAG: tag, "RAY_TMPDIR": temp, "RAY_USAGE_STATS_ENABLED": "0",
           "LLMREC_CACHE_DIR": str(tmp_path / "cache"),  # the records of local instances: this test's own
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # the toy benchmark
    env.pop("RAY_ADDRESS", None)
    return env


def new_tag() -> tuple[str, str]:
    """(tag, Ray temp folder) for one run."""
    return uuid.uuid4().hex, f"/tmp/lr{uuid.uuid4().hex[:8]}"  # short: Ray's socket paths are length-limited


def _start(tmp_path: Path, case: str, n: int, execution: dict, delay_s: float):
    cfg = {"benchmark": {"name": NAME, "n": n, "rounds": 0},
           "engine": {"type": "fake", "default": "yes", "delay_s": delay_s},
           "execution": {"batch_size": 1, "backoff_s": 0.01, "retries": 1, **execution},
           "ray": {"num_cpus": 2},
           "output": {"dir": str(tmp_path / case / "runs"), "run_name": case},
           "tracking": {"enabled": False}}
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    tag, temp = new_tag()
    proc = subprocess.Popen([LLMREC, "run", str(path)], cwd=tmp_path, env=run_env(tmp_path, tag, temp),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, tag, temp, tmp_path / case / "runs" / case / "results"


def gone_soon(tag: str, temp: str, within_s: float = 40.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := _theirs(tag, temp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_no_process_of_a_run_outlives_it(tmp_path):
    # a budget stop (exit 3): in-flight batches of two actors are abandoned; one line says so, no Ray notice
    proc, tag, temp, _ = _start(tmp_path, "budget", 6, {"concurrency": 2, "budget": {"tokens": 5}}, 0.2)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 3, err[-3000:]
    said = [ln for ln in (out + err).splitlines() if ln.strip() and "━" not in ln]
    assert len([ln for ln in said if "budget reached" in ln]) == 1, said
    assert not [ln for ln in said if "(raylet)" in ln or "ray.kill" in ln], said
    assert gone_soon(tag, temp) == []

    # SIGTERM, then SIGKILL of the driver while its map actors are busy
    for sig in (signal.SIGTERM, signal.SIGKILL):
        case = signal.Signals(sig).name.lower()
        proc, tag, temp, results = _start(tmp_path, case, 40, {"concurrency": 1}, 1.0)
        deadline = time.monotonic() + 400
        while not (results.is_dir() and any(results.iterdir())) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.5)
        running = _theirs(tag, temp)
        assert len(running) >= 3, running  # the driver, Ray's servers, the map actor: the test sees them
        proc.send_signal(sig)
        proc.communicate(timeout=120)
        assert gone_soon(tag, temp) == [], f"{case}: still running"
