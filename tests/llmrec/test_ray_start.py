"""One Ray start for every verb: ``llmrec.ray_start.start_ray`` is the only ``ray.init`` call, and it
keeps each verb's options (address, local CPUs, worker niceness, where workers' logs go)."""

from __future__ import annotations

import ast
import sys
import types

import pytest

from llmrec.ray_start import start_ray
from tests.conftest import REPO


@pytest.fixture
def fake_ray(monkeypatch):
    calls: list[dict] = []
    state = {"up": False}

    def init(**kw):
        calls.append(kw)
        state["up"] = True

    mod = types.SimpleNamespace(init=init, is_initialized=lambda: state["up"], cluster_resources=lambda: {})
    monkeypatch.setitem(sys.modules, "ray", mod)
    return calls


def test_local_instance_gets_cpus_and_niceness(fake_ray):
    assert start_ray(None, num_cpus=2, worker_niceness=0, worker_logs=False) is True
    (kw,) = fake_ray
    assert kw["address"] is None and kw["num_cpus"] == 2 and kw["_system_config"] == {"worker_niceness": 0}
    assert kw["log_to_driver"] is False and kw["include_dashboard"] is False
    assert start_ray(None, num_cpus=4) is False and len(fake_ray) == 1  # already up: joined once


def test_joining_a_cluster_passes_no_local_options(fake_ray):
    start_ray("auto", num_cpus=2, worker_niceness=5)
    (kw,) = fake_ray
    assert kw["address"] == "auto" and kw["configure_logging"] is False
    assert not {"num_cpus", "_system_config", "include_dashboard"} & set(kw)


def _inits(path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "init" and isinstance(n.func.value, ast.Name) and n.func.value.id == "ray"]


def test_ray_init_is_called_in_one_module_only():
    folders = ("llmrec", "pipelines", "serving", "models", "tuning", "cluster")
    found = {str(p.relative_to(REPO)): lines for f in folders for p in (REPO / f).rglob("*.py") if (lines := _inits(p))}
    assert list(found) == ["llmrec/ray_start.py"], found
