"""The core of the benchmark contract: the six members every benchmark supplies (config, samples, stages,
score). Everything else a benchmark may do is an opt-in capability (``pipelines/capabilities.py``) with the
default a benchmark without it gets, so a new benchmark starts from these six and adds only what it uses."""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.parts import BenchmarkConfig, Sample, Stage
from llmrec.pipelines.record import Payload


class Benchmark:
    """Base class of every benchmark: what the runner needs of each one.

    ``name`` (its registry name), ``config_cls`` (a ``BenchmarkConfig`` subclass), ``payload`` (a ``Payload``
    subclass: every per-sample field, typed), and the methods ``build_samples`` (data → samples, JSON-able dicts
    with a stable ``sample_id``), ``stages`` (the ordered model calls, each rendering a request from a sample and
    folding the result back into it) and ``score`` (a finished sample → its score fields). All plain functions:
    they run without Ray. :func:`~llmrec.pipelines.conformance.check_benchmark` verifies them, and the members of
    every capability the benchmark declares, at discovery — a benchmark that does not conform fails at
    ``llmrec list``, before any model call. A benchmark declaring only these runs end to end: its metrics are
    the default ``Aggregates.aggregate`` (counts by status), it has no groups, score tasks, judges or plots.
    """

    name: str
    config_cls: type[BenchmarkConfig]
    payload: type[Payload]

    def build_samples(self, cfg: BenchmarkConfig, data_dir: Path) -> list[Sample]:
        raise NotImplementedError

    def stages(self, cfg: BenchmarkConfig) -> list[Stage]:
        raise NotImplementedError

    def score(self, cfg: BenchmarkConfig, sample: Sample) -> dict:
        raise NotImplementedError


CORE_ATTRIBUTES = ("name", "config_cls", "payload")
CORE_METHODS = ("build_samples", "stages", "score")
"""The core's members, as :func:`check_benchmark` requires them (a test holds the core to at most six)."""
