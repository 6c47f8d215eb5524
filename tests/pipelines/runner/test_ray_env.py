"""The local Ray instance a run starts: engine actors at normal scheduling priority."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

SCRIPT = """
import os, sys, ray
from llmrec.pipelines.runner.ray_env import ensure_ray
from llmrec.pipelines.runner.run_config import RayConfig
extra = {{"worker_niceness": int(sys.argv[1])}} if len(sys.argv) > 1 else {{}}
ensure_ray(RayConfig(num_cpus=1, **extra))

@ray.remote(num_cpus=0)
def niceness():
    return os.nice(0)

print("NICE", ray.get(niceness.remote()))
ray.shutdown()
"""


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("args, expected", [([], 0), (["5"], 5)])
def test_local_ray_workers_run_at_the_configured_niceness(args, expected):
    # Ray's own default is 15: an engine actor at 15 is preempted by anything else on the node
    tmp = tempfile.mkdtemp(prefix="rn", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT.format(), *args], capture_output=True, text=True,
                             timeout=120, cwd=tmp, env={**os.environ, "RAY_TMPDIR": tmp})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert f"NICE {expected}" in out.stdout, out.stderr[-2000:]


LOG_MONITOR = """
import psutil, ray
from llmrec.ray_start import start_ray
start_ray(None, num_cpus=1, worker_logs={worker_logs})

@ray.remote(num_cpus=0)
def one():
    return 1

monitors = [p for p in psutil.Process().children(recursive=True) if "log_monitor" in " ".join(p.cmdline())]
print("TASK", ray.get(one.remote()), "LOG_MONITORS", len(monitors))
ray.shutdown()
print("SHUTDOWN", sum(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in monitors))
"""


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("worker_logs, monitors", [(False, 0), (True, 1)])
def test_a_local_instance_runs_a_log_monitor_only_where_workers_output_is_shown(worker_logs, monitors):
    # the log monitor forwards workers' output to drivers; a run shows none (log_to_driver=False)
    tmp = tempfile.mkdtemp(prefix="rl", dir="/tmp")
    try:
        out = subprocess.run([sys.executable, "-c", LOG_MONITOR.format(worker_logs=worker_logs)], capture_output=True,
                             text=True, timeout=120, cwd=tmp, env={**os.environ, "RAY_TMPDIR": tmp})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert f"TASK 1 LOG_MONITORS {monitors}" in out.stdout, out.stderr[-2000:]
    assert "SHUTDOWN 0" in out.stdout, out.stderr[-2000:]
