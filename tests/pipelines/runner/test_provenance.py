"""Every run directory holds a provenance record (``provenance.json``: software, machine, each engine's own report,
sampling, seeds, the data fingerprint, the names of the environment variables set), logged as MLflow tags too; no
credential's value appears in any file a run writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from llmrec import provenance as prov
from llmrec.rundir import RunDir
from llmrec.serving.engine import build_engine, engine_args, engine_provenance

SECRETS = {"OPENAI_API_KEY": "sk-test-Vq83hZ1kP0s3cr3tValue",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnF3MI/K7MDENGbPxRfiCYs3cr3t", "LLMREC_TEST_TOKEN": "tok-77aa9c1d2e3f"}


def test_differences_are_flattened_sorted_and_skip_where_and_when():
    a = {"created": "t1", "packages": {"numpy": "2.0"}, "engines": {"subject": {"model": {"sha256": "aa"}}},
         "env": {"set": ["X"]}}
    b = {"created": "t2", "packages": {"numpy": "2.1", "ray": "2.5"},
         "engines": {"subject": {"model": {"sha256": "bb"}}}, "env": {"set": ["Y"]}}
    assert prov.differences(a, b) == [("engines.subject.model.sha256", "aa", "bb"), ("packages.numpy", "2.0", "2.1"),
                                      ("packages.ray", None, "2.5")]
    assert prov.differences(a, a) == []


def test_env_names_never_values():
    names = prov.env_names({"OPENAI_API_KEY": "sk-x", "HOME": "/home/u", "CUDA_VISIBLE_DEVICES": "0",
                            "PYTHONHASHSEED": "0"})
    assert names == ["CUDA_VISIBLE_DEVICES", "OPENAI_API_KEY", "PYTHONHASHSEED"]


def test_cached_sha256_hashes_again_only_when_the_file_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "w.bin"
    f.write_bytes(b"weights")
    calls = []
    real = prov.sha256_of
    monkeypatch.setattr(prov, "sha256_of", lambda p: calls.append(p) or real(p))
    first = prov.cached_sha256(f)
    assert prov.cached_sha256(f) == first == prov.text_sha256(b"weights") and len(calls) == 1
    f.write_bytes(b"other weights")
    assert prov.cached_sha256(f) == prov.text_sha256(b"other weights") and len(calls) == 2


def test_engine_args_leave_out_credentials():
    eng = build_engine({"type": "openai", "model": "m", "base_url": "http://user:pw@127.0.0.1:9/v1?sig=abc",
                        "api_key_env": "OPENAI_API_KEY"})
    args = engine_args(eng.config)
    text = json.dumps(engine_provenance(eng))
    assert "pw@" not in text and "sig=abc" not in text and args["api_key_env"] == "OPENAI_API_KEY"
    assert engine_provenance(build_engine({"type": "fake"}))["engine_args"]["default"] == "<choice>A</choice>"


def test_a_run_records_its_provenance_and_no_secret(tmp_path, local_ray, monkeypatch):
    from llmrec.pipelines.runner.api import run_evaluation
    from tests.pipelines.runner.test_runner_toy import run_config

    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    cfg = run_config(tmp_path, n=4)
    out = run_evaluation(cfg)
    rd = RunDir(out.run_dir)
    record = rd.provenance()
    assert record["format"] == 1 and record["llmrec"]["version"]
    assert {"ray", "numpy", "pyarrow"} <= set(record["packages"])
    assert record["python"]["version"] and record["host"]["cpu"]
    subject = record["engines"]["subject"]
    assert subject["reported_by"] == "the engine where it ran" and subject["engine_args"]["type"] == "fake"
    assert record["sampling"]["subject"] and all("temperature" in s for s in record["sampling"]["subject"])
    assert set(SECRETS) <= set(record["env"]["set"])  # the names were set: recorded as names
    # the tags of the MLflow run
    from llmrec import tracking

    tags = tracking.client(cfg.tracking.uri).get_run(out.mlflow_run_id).data.tags
    assert tags["llmrec.provenance.packages.ray"] == record["packages"]["ray"]
    assert tags["llmrec.provenance.llmrec.version"] == record["llmrec"]["version"]
    # no secret's value in any file the run wrote: run directory, MLflow store, artifacts
    found = []
    for f in Path(tmp_path).rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            found += [f"{f}: {k}" for k, v in SECRETS.items() if v.encode() in data]
    assert not found, found
    assert os.environ["OPENAI_API_KEY"] == SECRETS["OPENAI_API_KEY"]  # they were set throughout


def test_a_plan_that_ran_no_engine_names_none(tmp_path):
    """A suite's traditional baseline is written through the same report without a result store: its record must not
    name the subject's engine (nor load or hash its model)."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.execution import RunPlan
    from llmrec.pipelines.runner.provenance_record import run_provenance
    from tests.pipelines.runner.test_runner_toy import run_config

    cfg = run_config(tmp_path, n=2)
    plan = RunPlan(cfg, get_benchmark(cfg.benchmark.name), [], tmp_path / "run", None)
    record = run_provenance(plan, [])
    assert record["engines"] == {} and record["sampling"] == {} and record["data"] == {}
