"""The benchmark through the runner's per-sample worker (no Ray) with the fake engine: every
variant renders, constraints are set as configured, answers are scored and aggregated."""

from __future__ import annotations

from llmrec.pipelines.benchmarks.lrworld import BENCHMARK
from llmrec.pipelines.benchmarks.lrworld.builders.knowledge import build_knowledge
from llmrec.pipelines.benchmarks.lrworld.builders.memory import build_memory
from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig
from llmrec.pipelines.benchmarks.lrworld.samples import add_noise, expand
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig


class Recording(FakeEngine):
    def __init__(self, config):
        super().__init__(config)
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return super().generate(requests)


def test_all_variants_through_the_worker(sim_catalog):
    built = build_knowledge(sim_catalog, "genres", sim_catalog.attributes["genres"], 10, 0, history_len=2)
    built += build_memory(sim_catalog, "item", 3, 0)
    add_noise(built, 0)
    cfg = LRWorldConfig(variants=["base", "noisy", "fewshot", "cot"], position_runs=2, shots=1)
    rows = expand(cfg, built)
    engine = Recording(FakeEngineConfig(type="fake", default="The answer is B"))
    engine.start()
    out = process_samples(BENCHMARK, cfg, rows, lambda _: engine, retries=0, backoff_s=0,
                          assets=BENCHMARK.assets(cfg, None))
    assert all(r["status"] == "ok" for r in out) and len(engine.requests) == len(rows)
    cot = [q for q, r in zip(engine.requests, out) if r["variant"] == "cot"]
    assert cot and all(q.constraint is None and q.sampling.max_tokens == cfg.sampling.cot_max_tokens for q in cot)
    direct = [q for q, r in zip(engine.requests, out) if r["variant"] != "cot"]
    assert all(q.constraint.choices in (["A", "B", "C", "D"], [str(k) for k in range(1, 11)]) for q in direct)
    assert all(q.sampling.temperature == 0.0 for q in engine.requests)
    # constrained MCQ rows get the first choice ("A"); CoT rows answer "B" via the regex
    mcq_cot = [r for r in out if r["variant"] == "cot" and r["kind"] == "mcq"]
    assert all(r["parsed"] == "B" and r["correct"] == (r["gold"] == "B") for r in mcq_cot)
    assert not any("_shots" in r for r in out)
    m = BENCHMARK.aggregate(cfg, out, None)
    for v in ("base", "noisy", "fewshot", "cot"):
        assert f"{v}/accuracy" in m
    assert "position/entity_attribute/toy/genres/var" in m and "noisy/factor/entity_attribute/drop" in m


def test_unconstrained_engine_answers_are_parsed(sim_catalog):
    rows = expand(LRWorldConfig(), build_memory(sim_catalog, "item", 2, 0))
    cfg = LRWorldConfig(sampling={"constrained": False})
    engine = FakeEngine(FakeEngineConfig(type="fake", default="I think candidate 3 fits."))
    engine.start()
    out = process_samples(BENCHMARK, cfg, rows, lambda _: engine, retries=0, backoff_s=0,
                          assets=BENCHMARK.assets(cfg, None))
    assert [r["parsed"] for r in out] == ["3", "3"] and all(not r["missed"] for r in out)
