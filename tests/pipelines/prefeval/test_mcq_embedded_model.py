"""PrefEval MCQ with the real embedded model (Gemma 3 270M via llama.cpp) on a local Ray."""

from __future__ import annotations

import pytest

from pipelines.api import run_evaluation
from pipelines.run_config import load_run_config
from pipelines.store import ResultStore
from tests.pipelines.conftest import config

pytestmark = pytest.mark.slow
pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'cpu') is not installed")


def test_embedded_model_run_and_cached_rerun(tmp_path, data_root, local_ray):
    engine = {"type": "llamacpp", "n_ctx": 4096, "n_threads": 2, "choice_mode": "score"}
    cfg = load_run_config(config(tmp_path, engine=engine, topics=["travel_restaurant"], forms=["explicit"],
                                 turns=[0, 1], methods=["zero-shot"], per_topic=1, pref_reply_max_tokens=16))
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
                                                  per_topic=1, pref_reply_max_tokens=16),
                                           ["output.resume=false"]), data_root)
    assert rerun.stats["engine_calls"] == 0 and rerun.metrics["accuracy"] == first.metrics["accuracy"]
