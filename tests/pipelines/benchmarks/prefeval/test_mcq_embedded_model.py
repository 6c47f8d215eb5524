"""PrefEval MCQ with the real embedded model (Gemma 3 270M via llama.cpp) on a local Ray."""

from __future__ import annotations

import pytest

from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from llmrec.pipelines.common.store import ResultStore
from tests.pipelines.conftest import config

pytestmark = [pytest.mark.slow, pytest.mark.model]
pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'cpu') is not installed")

# not the reference defaults (free-form answers in 5 tokens, the preference reply capped at 5): the 270M base
# model needs closed choices, and a short real reply keeps the prefix test meaningful
OLD = {"constrain_choice": True, "answer_max_tokens": 16}


def test_embedded_model_run_and_cached_rerun(tmp_path, data_root, local_ray):
    engine = {"type": "llamacpp", "n_ctx": 4096, "n_threads": 1, "choice_mode": "score"}
    # no MLflow store: nothing here reads one, and creating it costs seconds
    cfg = load_run_config(config(tmp_path, engine=engine, topics=["travel_restaurant"], forms=["explicit"],
                                 turns=[0, 1], methods=["zero-shot"], per_topic=1, pref_reply_max_tokens=16, **OLD),
                          ["tracking.enabled=false"])
    first = run_evaluation(cfg, data_root)
    assert first.metrics["n_answered"] == 2 and first.metrics["failed"] == 0
    recs = list(ResultStore(first.run_dir / "results").load().values())
    for r in recs:
        assert r["output"] in {f"<choice>{c}</choice>" for c in "ABCD"}  # constrained answer
        assert r["prediction"] in "ABCD" and r["prompt_tokens"] > 50
        assert r["pref_reply"]  # the model's own live reply to the explicit preference
    assert recs[0]["pref_reply"] == recs[1]["pref_reply"]  # one reply per preference (cached / deduplicated)
    assert first.stats["engine_calls"] == 3  # 1 reply + 2 answers
    assert first.stats["prefix_cache_hit_rate"] > 0  # the two answers share the preference prefix
    rerun = run_evaluation(load_run_config(config(tmp_path, engine=engine, topics=["travel_restaurant"],
                                                  forms=["explicit"], turns=[0, 1], methods=["zero-shot"],
                                                  per_topic=1, pref_reply_max_tokens=16, **OLD),
                                           ["output.resume=false", "tracking.enabled=false"]), data_root)
    assert rerun.stats["engine_calls"] == 0 and rerun.metrics["accuracy"] == first.metrics["accuracy"]


def test_prefix_reuse_does_not_change_answers(data_root):
    """Greedy answers are identical with the KV prefix reused (as the runner orders them) or not."""
    from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
    from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
    from llmrec.pipelines.runner.worker import group_by_prefix, process_samples
    from llmrec.serving.engines.llamacpp import LlamaCppEngine, LlamaCppEngineConfig

    cfg = PrefEvalConfig(topics=["travel_restaurant"], per_topic=1, turns=[1, 4], forms=["explicit"],
                         pref_reply_max_tokens=12, **OLD)
    outs, cached = [], []
    for reuse in (True, False):
        samples = [s for g in group_by_prefix(attach_assets(BENCHMARK.build_samples(cfg, data_root), BENCHMARK.assets(cfg, data_root))) for s in g]
        eng = LlamaCppEngine(LlamaCppEngineConfig(n_ctx=4096, n_threads=1, reuse_prefix=reuse, choice_mode="score"))
        eng.start()
        process_samples(BENCHMARK, cfg, samples, lambda role: eng, retries=0)
        outs.append({s["sample_id"]: (s["pref_reply"], s["output"]) for s in samples})
        cached.append(eng.stats["cached_prompt_tokens"])
        eng.close()
    assert cached[0] > 0 and cached[1] == 0
    assert outs[0] == outs[1]
