"""perf/actor_overhead.py: the same llama.cpp work timed in the driver, a plain Ray actor and a Ray Data map actor,
each round on its own local Ray, with the CPU Ray's other processes took beside the map actor."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "actor_overhead.py"


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    tmp = tempfile.mkdtemp(prefix="ao", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    try:
        return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=tmp, env={**os.environ, "RAY_TMPDIR": tmp})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("args, says", [(["--rounds", "0"], "must be at least 1"),
                                        (["--prompt-tokens", "5000"], "at most 4000")])
def test_bad_arguments_are_refused_before_anything_runs(args, says):
    out = _run(*args, timeout=60)
    assert out.returncode == 2 and says in out.stderr


@pytest.mark.slow
@pytest.mark.model
def test_times_the_work_in_each_place_and_what_ran_beside_it():
    pytest.importorskip("llama_cpp")
    out = _run("--reps", "1", "--prompt-tokens", "32", "--new-tokens", "2", "--rounds", "2", "--threads", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    rounds = re.findall(r"^round (\d): (.*)$", out.stdout, re.M)
    assert [r for r, _ in rounds] == ["1", "2"]
    # every other round reversed, so drift weighs on every place alike
    order = [re.findall(r"(direct|actor|ray_data) [\d.]+ s", cells) for _, cells in rounds]
    assert order == [["direct", "actor", "ray_data"], ["ray_data", "actor", "direct"]]
    # each pass says how often the kernel took a CPU from the engine's threads (0 is possible on an idle core)
    assert all(len(re.findall(r"s \(cpu [\d.]+ s, preempted \d+, load", cells)) == 3 for _, cells in rounds), out.stdout
    assert re.search(r"preempted \(median per pass\): direct \d+  actor \d+  ray_data \d+", out.stdout), out.stdout
    summary = re.search(r"actor median ([\d.]+) spread ([\d.]+)-([\d.]+)\s+ray_data median ([\d.]+)", out.stdout)
    assert summary and all(float(x) > 0 for x in summary.groups()), out.stdout
    beside = out.stdout.split("CPU seconds beside the map actor", 1)[1]
    assert "driver" in beside and "MapWorker" not in beside  # the map actor's own CPU is the work, not beside it
