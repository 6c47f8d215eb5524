"""The toy benchmark cut down to the core: config, payload, samples, stages and score, no capability. It must
run end to end with every capability's default (metrics: counts by status; no groups, plots or score tasks)."""

from __future__ import annotations

from llmrec.pipelines.protocol import Benchmark
from tests.pipelines.toy.benchmark import Toy, ToyConfig, ToyPayload

NAME = "tests.pipelines.toy.core_only:BENCHMARK"


class CoreToy(Benchmark):
    name = "core_toy"
    config_cls = ToyConfig
    payload = ToyPayload
    build_samples, stages, score = Toy.build_samples, Toy.stages, Toy.score


BENCHMARK = CoreToy()
