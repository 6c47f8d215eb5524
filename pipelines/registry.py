"""The benchmark and score-task registries.

Discovery imports every sub-package of ``llmrec.pipelines.benchmarks`` (a folder that
holds only benchmarks) and registers its ``BENCHMARK``; the registries are frozen after
discovery. Every benchmark is checked against the protocol when it is registered (or imported
as ``module:ATTR``): one that does not conform fails naming what is missing. The runner and the CLI
look benchmarks up here by name and know nothing else of them.
"""

from __future__ import annotations

import importlib
import pkgutil

from llmrec.config import validate
from llmrec.errors import ConfigError
from llmrec.pipelines.protocol import Benchmark, BenchmarkConfig, ScoreTask, check_benchmark
from llmrec.registry import Registry, expects

BENCHMARK_PACKAGE = "llmrec.pipelines.benchmarks"


def _discover() -> None:
    pkg = importlib.import_module(BENCHMARK_PACKAGE)
    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.ispkg:
            continue
        module = importlib.import_module(f"{BENCHMARK_PACKAGE}.{mod.name}")
        bench = getattr(module, "BENCHMARK", None)
        if bench is None:
            raise ConfigError(f"{module.__name__} is in the benchmarks folder but exports no BENCHMARK")
        BENCHMARKS.register(mod.name, bench)
        for task in bench.score_tasks:
            SCORE_TASKS.register(task.name, task)
    BENCHMARKS.freeze()
    SCORE_TASKS.freeze()


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", _discover, check_benchmark)
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
