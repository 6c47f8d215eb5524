"""A benchmark that does not conform: no ``aggregate``, ``plots`` without the assets argument, a
headline that is a string. Discovery (and ``llmrec list``) must refuse it before any model call."""

from __future__ import annotations

from llmrec.pipelines.protocol import Benchmark
from tests.pipelines.toy.benchmark import Toy, ToyConfig, ToyPayload


class Bad(Benchmark):
    name = "bad"
    config_cls = ToyConfig
    payload = ToyPayload
    group_keys = ("kind",)
    score_tasks = ()
    headline_metrics = "accuracy"
    build_samples, stages, score = Toy.build_samples, Toy.stages, Toy.score

    def plots(self, cfg, rows, out_dir):
        return []


BENCHMARK = Bad()
