"""The benchmark and score-task registries.

Discovery imports every sub-package of ``llmrec.pipelines.benchmarks`` (a folder that
holds only benchmarks) and registers its ``BENCHMARK``; the registries are frozen after
discovery. A lookup by name imports that benchmark's package alone when the folder has it (a run's
map actors need one benchmark); listing the benchmarks, or a name the folder does not have, discovers
them all. Every benchmark is checked against the protocol when it is registered (or imported
as ``module:ATTR``): one that does not conform fails naming what is missing. The runner and the CLI
look benchmarks up here by name and know nothing else of them.
"""

from __future__ import annotations

import importlib
import pkgutil

from llmrec.config import validate
from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import Benchmark, BenchmarkConfig, ScoreTask, check_benchmark
from llmrec.registry import Registry, expects

BENCHMARK_PACKAGE = "llmrec.pipelines.benchmarks"


def _packages() -> list[str]:
    """The names of the benchmarks folder's sub-packages (each one benchmark)."""
    pkg = importlib.import_module(BENCHMARK_PACKAGE)
    return [mod.name for mod in pkgutil.iter_modules(pkg.__path__) if mod.ispkg]


def _discover() -> None:
    for name in _packages():
        _register(name)
    BENCHMARKS.freeze()
    SCORE_TASKS.freeze()


def _register(name: str) -> None:
    """Import the benchmark package ``name`` of the folder; register its BENCHMARK and score tasks."""
    module = importlib.import_module(f"{BENCHMARK_PACKAGE}.{name}")
    bench = getattr(module, "BENCHMARK", None)
    if bench is None:
        raise ConfigError(f"{module.__name__} is in the benchmarks folder but exports no BENCHMARK")
    BENCHMARKS.register(name, bench)
    for task in caps.score_tasks(bench):
        SCORE_TASKS.register(task.name, task)


def _find(name: str) -> None:
    """The one benchmark ``name``, when the folder has a package of that name: a run's actors and a verb given
    one benchmark import its code only (the five together take over a second to import)."""
    if name.isidentifier() and name in _packages():
        _register(name)


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", _discover, check_benchmark, _find)
SCORE_TASKS: Registry[ScoreTask] = Registry(
    "score task", BENCHMARKS.discover,
    expects("score task", lambda o: isinstance(o, ScoreTask), "an llmrec.pipelines.protocol.ScoreTask"))


def get_benchmark(name: str) -> Benchmark:
    return BENCHMARKS.get(name)


def benchmark_config(data: dict | BenchmarkConfig, prefix: str = "benchmark") -> BenchmarkConfig:
    if isinstance(data, BenchmarkConfig):
        return data
    if not isinstance(data, dict) or "name" not in data:
        raise ConfigError(f"'{prefix}' needs a 'name'. Available: {', '.join(BENCHMARKS.names())}")
    bench = get_benchmark(str(data["name"]))
    return validate(bench.config_cls, data, prefix)
