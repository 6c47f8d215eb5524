"""A benchmark that does not conform: no ``score``, ``plots`` without the assets argument, a headline that is a
string (both of its ``Presents``), and ``explain`` without declaring ``Explains``. Discovery (and ``llmrec list``)
must refuse it before any model call."""

from __future__ import annotations

from llmrec.pipelines.protocol import Benchmark, Presents
from tests.pipelines.toy.benchmark import Toy, ToyConfig, ToyPayload


class Bad(Benchmark, Presents):
    name = "bad"
    config_cls = ToyConfig
    payload = ToyPayload
    headline_metrics = "accuracy"
    build_samples, stages = Toy.build_samples, Toy.stages

    def plots(self, cfg, rows, out_dir):
        return []

    def explain(self, row):
        return None


BENCHMARK = Bad()
