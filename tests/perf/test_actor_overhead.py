"""perf/actor_overhead.py: the same llama.cpp work timed in the driver, a plain Ray actor and a Ray Data map actor,
each round on its own local Ray, with the CPU Ray's other processes took beside the map actor.

The script's own argument checks and its round order run in this process (its ``main`` with the places stubbed:
no model, no Ray); the real work runs once, one round, in a process of its own."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "actor_overhead.py"


def _script():
    spec = importlib.util.spec_from_file_location("actor_overhead", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    tmp = tempfile.mkdtemp(prefix="ao", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    try:
        return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=tmp, env={**os.environ, "RAY_TMPDIR": tmp})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("args, says", [(["--rounds", "0"], "must be at least 1"),
                                        (["--prompt-tokens", "5000"], "at most 4000")])
def test_bad_arguments_are_refused_before_anything_runs(args, says, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *args])
    monkeypatch.setattr(script, "work", lambda *a: pytest.fail("the work ran"))
    monkeypatch.setattr(script, "in_ray", lambda *a: pytest.fail("Ray started"))
    with pytest.raises(SystemExit) as exit_:
        script.main()
    assert exit_.value.code == 2 and says in capsys.readouterr().err


def test_rounds_alternate_the_order_of_the_places(monkeypatch, capsys):
    """Every other round runs the places in reverse order, so drift weighs on every place alike (the places
    stubbed: what each one measures is the slow test's)."""
    script = _script()
    ran: list[str] = []

    def work(*spec):
        ran.append("direct")
        return {"s": 1.0, "cpu_s": 1.0, "preempted": 3}

    def in_ray(place, args):
        ran.append(place)
        return {"s": 1.1, "cpu_s": 1.0, "preempted": 5}, {"driver (pid 1)": 0.5}

    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--rounds", "3"])
    monkeypatch.setattr(script, "work", work)
    monkeypatch.setattr(script, "in_ray", in_ray)
    script.main()
    out = capsys.readouterr().out
    forward, backward = ["direct", "actor", "ray_data"], ["ray_data", "actor", "direct"]
    assert ran == forward + backward + forward
    rounds = re.findall(r"^round (\d): (.*)$", out, re.M)
    assert [r for r, _ in rounds] == ["1", "2", "3"]
    assert [re.findall(r"(direct|actor|ray_data) [\d.]+ s", cells) for _, cells in rounds] == [forward, backward,
                                                                                                 forward]
    assert "actor median 1.100 spread 1.100-1.100  ray_data median 1.100" in out, out
    assert re.search(r"preempted \(median per pass\): direct 3  actor 5  ray_data 5", out), out


@pytest.mark.slow
@pytest.mark.model
def test_times_the_work_in_each_place_and_what_ran_beside_it():
    pytest.importorskip("llama_cpp")
    # a process of its own: the script starts and stops a local Ray per place, and times `direct` with no Ray at all
    out = _run("--reps", "1", "--prompt-tokens", "32", "--new-tokens", "2", "--rounds", "1", "--threads", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    rounds = re.findall(r"^round (\d): (.*)$", out.stdout, re.M)
    assert [r for r, _ in rounds] == ["1"]
    order = [re.findall(r"(direct|actor|ray_data) [\d.]+ s", cells) for _, cells in rounds]
    assert order == [["direct", "actor", "ray_data"]]  # the reversed second round: test_rounds_alternate_...
    # each pass says how often the kernel took a CPU from the engine's threads (0 is possible on an idle core)
    assert all(len(re.findall(r"s \(cpu [\d.]+ s, preempted \d+, load", cells)) == 3 for _, cells in rounds), out.stdout
    assert re.search(r"preempted \(median per pass\): direct \d+  actor \d+  ray_data \d+", out.stdout), out.stdout
    summary = re.search(r"actor median ([\d.]+) spread ([\d.]+)-([\d.]+)\s+ray_data median ([\d.]+)", out.stdout)
    assert summary and all(float(x) > 0 for x in summary.groups()), out.stdout
    beside = out.stdout.split("CPU seconds beside the map actor", 1)[1]
    assert "driver" in beside and "MapWorker" not in beside  # the map actor's own CPU is the work, not beside it
