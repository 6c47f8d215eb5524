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
