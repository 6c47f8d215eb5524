"""The one Registry type: clear errors for duplicates and unknown names, freezing, plugins."""

import pytest

from llmrec.errors import ConfigError
from llmrec.registry import Registry, RegistryError


class A:
    pass


class B:
    pass


def test_duplicate_name_names_both_owners():
    r = Registry("widget")
    r.register("a", A)
    r.register("a", A)  # the same object again is harmless (a module imported twice)
    with pytest.raises(RegistryError, match=r"widget 'a' is registered twice: .*test_registry.A and .*test_registry.B"):
        r.register("a", B)


def test_frozen_registry_refuses_new_names_and_lists_on_unknown():
    r = Registry("widget")
    r.register("a", A)
    r.freeze()
    assert r.frozen
    with pytest.raises(RegistryError, match="frozen; cannot add 'b'"):
        r.register("b", B)
    with pytest.raises(ConfigError, match=r"Unknown widget 'nope'. Available: a"):
        r.get("nope")


def test_discovery_runs_once_and_plugins_import_by_path():
    calls = []
    r = Registry("widget", lambda: calls.append(1) or r.register("a", A))
    assert r.names() == ["a"] and "a" in r and r.get("a") is A
    assert calls == [1]
    assert r.get("tests.llmrec.test_registry:B") is B
    with pytest.raises(ConfigError, match="cannot import 'C'"):
        r.get("tests.llmrec.test_registry:C")


def test_builtin_registries_are_frozen_after_discovery():
    from llmrec.models.base import MODELS
    from llmrec.pipelines.registry import BENCHMARKS, SCORE_TASKS
    from llmrec.serving.engine import ENGINES

    for reg in (BENCHMARKS, SCORE_TASKS, ENGINES, MODELS):
        reg.names()
        assert reg.frozen, reg.kind


def test_concurrent_first_lookups_wait_for_discovery():
    import threading
    import time

    def slow_discovery():
        time.sleep(0.2)
        r.register("a", A)

    r = Registry("widget", slow_discovery)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(r.names())) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen == [["a"]] * 4


def test_lookup_by_name_finds_one_item_before_discovering_all():
    calls = []

    def find(name):
        if name == "a":
            r.register("a", A)

    def discover():
        calls.append(1)
        r.register("a", A)
        r.register("b", B)

    r = Registry("widget", discover, find=find)
    assert r.get("a") is A and calls == [] and not r.frozen  # found alone: nothing else imported
    assert r.get("b") is B and calls == [1]  # not findable alone: everything discovered
    assert r.names() == ["a", "b"] and calls == [1]
    with pytest.raises(ConfigError, match=r"Unknown widget 'c'. Available: a, b"):
        r.get("c")


@pytest.mark.integration  # a clean interpreter: which packages one lookup imports
def test_a_benchmark_looked_up_by_name_imports_its_own_package_only():
    """A run's map actors and a verb given one benchmark import that benchmark's code, not all five (over a
    second of imports); listing them still finds every one, and the registries freeze as before."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from llmrec.pipelines.registry import BENCHMARKS, SCORE_TASKS, get_benchmark\n"
        "b = get_benchmark('prefeval')\n"
        "others = [m for m in ('beyond_utility', 'gistbench', 'lrworld', 'perrecbench')\n"
        "          if 'llmrec.pipelines.benchmarks.' + m in sys.modules]\n"
        "assert others == [], others\n"
        "assert not BENCHMARKS.frozen\n"
        "names = BENCHMARKS.names()\n"
        "assert {'prefeval', 'beyond_utility', 'gistbench', 'lrworld', 'perrecbench'} <= set(names), names\n"
        "assert BENCHMARKS.frozen and SCORE_TASKS.frozen and get_benchmark('prefeval') is b\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
