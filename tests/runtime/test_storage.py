"""Storage URIs: local paths made absolute; the result store and run directory on a real S3 API
(moto server on 127.0.0.1) with the same guarantees as on disk; data read only on the driver."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmrec import storage
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.protocol import sample_assets
from llmrec.pipelines.runner.run_config import absolute_locations, load_run_config
from tests.pipelines.conftest import config
from tests.runtime.helpers import s3_keys, s3_server


def test_relative_locations_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_run_config(config(tmp_path), ["output.dir=rel/runs", "tracking.uri=sqlite:///m.db",
                                             "tracking.artifact_root=./art", "data.dir=d"])
    out = absolute_locations(cfg)
    assert out.output.dir == str(tmp_path / "rel/runs") and out.data.dir == str(tmp_path / "d")
    assert out.tracking.uri == f"sqlite:///{tmp_path}/m.db" and out.tracking.artifact_root == str(tmp_path / "art")
    uri = absolute_locations(load_run_config(config(tmp_path), ["output.dir=s3://b/runs/"]))
    assert uri.output.dir == "s3://b/runs"


def test_local_store_keeps_newest_record(tmp_path):
    st = ResultStore(tmp_path / "r")
    st.write([{"sample_id": "a", "status": "failed", "error": "x"}])
    st.write([{"sample_id": "a", "status": "ok"}, {"sample_id": "b", "status": "ok"}])
    assert {k: v["status"] for k, v in st.load().items()} == {"a": "ok", "b": "ok"}
    assert not [p for p in (tmp_path / "r").iterdir() if p.name.startswith(".")]  # no temporaries left


def test_stage_without_assets_fails_clearly():
    with pytest.raises(KeyError, match="carries no shared assets"):
        sample_assets({"sample_id": "s1"})


@pytest.mark.slow
@pytest.mark.integration
def test_store_on_s3_keeps_newest_record():
    with s3_server() as bucket:
        st = ResultStore(f"s3://{bucket}/runs/x/results")
        st.write([{"sample_id": "a", "status": "failed", "error": "boom"}])
        st.write([{"sample_id": "a", "status": "ok", "output": "A"}])
        assert st.load()["a"]["output"] == "A" and st.finished_ids() == {"a"}
        assert len(s3_keys(bucket, "runs/x/results/")) == 2
        st.clear()
        assert st.load() == {}


@pytest.mark.slow
@pytest.mark.integration
def test_run_on_s3_completes_and_resumes(tmp_path, data_root, local_ray, monkeypatch):
    from llmrec.pipelines.runner.api import run_evaluation

    published: list[str] = []  # what the run uploads from its working folder, in order
    put = storage.Storage.put_file
    monkeypatch.setattr(storage.Storage, "put_file",
                        lambda self, local, rel: (published.append(rel), put(self, local, rel))[1])
    with s3_server() as bucket:
        sets = [f"output.dir=s3://{bucket}/runs", "output.run_name=s3run",
                f"output.cache_path={tmp_path / 'cache.sqlite'}"]
        first = run_evaluation(load_run_config(config(tmp_path, turns=[2]), sets), data_root)
        n = 2 * 2 * 2 * 2  # topics x forms x pairs x methods
        assert first.run_dir == f"s3://{bucket}/runs/s3run" and first.stats["samples_new"] == n
        keys = set(s3_keys(bucket, "runs/s3run/"))
        for name in ("resolved.yaml", "metrics.json", "samples.parquet", "predictions.jsonl", "mlflow_run_id"):
            assert f"runs/s3run/{name}" in keys, name
        assert any(k.startswith("runs/s3run/results/") for k in keys)
        assert any(k.startswith("runs/s3run/plots/") for k in keys)
        # the metrics mark the run directory complete: uploaded after every other file of the run
        assert published[-1] == "metrics.json" and "samples.parquet" in published, published
        remote = storage.Storage(first.run_dir)
        assert json.loads(remote.read_text("metrics.json")) == pytest.approx({**first.metrics, **first.cost})
        assert len(ResultStore(remote / "results").load()) == n
        again = run_evaluation(load_run_config(config(tmp_path, turns=[2]), sets), data_root)
        assert again.stats["samples_new"] == 0 and again.stats["engine_calls"] == 0
        assert again.stats["samples_resumed"] == n and again.metrics == first.metrics
        assert again.mlflow_run_id == first.mlflow_run_id  # the run id file on S3 was found


@pytest.mark.slow
@pytest.mark.integration
def test_data_directory_moved_away_after_planning(tmp_path, data_root, local_ray):
    """Workers never read the data directory nor a template file named in the config: both are
    gone before any sample runs (judge prompts, inter-turn conversations and template texts come
    through the object store), and the overridden templates are still the ones rendered."""
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner import execution
    from tests.pipelines.benchmarks.prefeval.test_prefeval_integration import JUDGE, SUBJECT, with_judge

    data, tpl = tmp_path / "data", tmp_path / "templates"
    shutil.copytree(data_root / "prefeval", data / "prefeval")
    tpl.mkdir()
    (tpl / "gen.txt").write_text("OVERRIDE-GEN {question}{reminder} ({word_limit} words)")
    (tpl / "critique.txt").write_text("OVERRIDE-CRITIQUE: what did you miss?")
    subject = {**SUBJECT, "rules": [{"contains": "OVERRIDE-GEN", "reply": "Answer from the overridden template."},
                                     {"contains": "OVERRIDE-CRITIQUE", "reply": "Critique of the override."},
                                     *SUBJECT["rules"]]}
    templates = {"gen_question": str(tpl / "gen.txt"), "critique": str(tpl / "critique.txt")}
    path = with_judge(config(tmp_path, engine=subject, task="gen", topics=["travel_hotel"], per_topic=1, turns=[3],
                             forms=["explicit", "choice"], methods=["zero-shot", "self-critic"],
                             templates=templates), JUDGE)
    real_plan = execution.plan

    def plan_then_move(cfg, data_dir=None):
        p = real_plan(cfg, data_dir)
        shutil.move(str(data), str(tmp_path / "moved"))
        shutil.move(str(tpl), str(tmp_path / "moved-templates"))
        return p

    execution_plan = pytest.MonkeyPatch()
    execution_plan.setattr("llmrec.pipelines.runner.api.plan", plan_then_move)
    try:
        out = run_evaluation(load_run_config(path, ["output.cache=false"]), data)
    finally:
        execution_plan.undo()
    assert not data.exists() and not tpl.exists()
    m = out.metrics
    assert m["n_samples"] == 4 and m["n_judged"] == 4 and m["failed"] == 0
    recs = list(ResultStore(Path(out.run_dir) / "results").load().values())
    assert all(r["status"] == "ok" for r in recs)
    zero = [r for r in recs if r["method"] == "zero-shot"]
    critic = [r for r in recs if r["method"] == "self-critic"]
    assert [r["output"] for r in zero] == ["Answer from the overridden template."] * 2
    assert all(r["initial_output"] == "Answer from the overridden template." for r in critic)
    assert all(r["critique"] == "Critique of the override." for r in critic)


def test_request_cache_file_stays_on_the_driver_disk(tmp_path, monkeypatch):
    from llmrec.pipelines.runner.execution import app_name, cache_path_for

    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))
    local = absolute_locations(load_run_config(config(tmp_path)))
    assert cache_path_for(local) == str(tmp_path / "runs" / "request_cache.sqlite")
    remote = absolute_locations(load_run_config(config(tmp_path), ["output.dir=s3://bucket/runs"]))
    assert cache_path_for(remote) == str(tmp_path / "cache" / "request_cache.sqlite")
    assert cache_path_for(load_run_config(config(tmp_path), ["output.cache=false"])) is None
    assert app_name("prefeval-1a2b", "judge") == "llmrec-prefeval-1a2b-judge"


def test_local_storage_round_trip(tmp_path):
    st = storage.Storage(tmp_path / "d") / "sub"
    st.write_text("a.txt", "hello")
    assert st.exists("a.txt") and st.read_text("a.txt") == "hello" and st.list(".txt") == ["a.txt"]
    assert st.local_path == tmp_path / "d" / "sub" and st.name == "sub"
    st.delete("a.txt")
    assert not st.exists("a.txt") and st.list() == []


def test_remote_data_copy_follows_what_the_location_holds_now(tmp_path, monkeypatch):
    """``data.dir`` at a storage URI: the local copy is reused only while the location's listing is the one it was
    copied from; an edited, added or removed file makes a new copy, so the data fingerprint is of the data now."""
    import uuid

    import fsspec

    from llmrec.pipelines.common.provenance import data_fingerprint

    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))  # the fingerprint's hash cache
    fs, root = fsspec.filesystem("memory"), f"/llmrec-{uuid.uuid4().hex[:8]}/data"
    fs.pipe(f"{root}/topic.json", b'[{"q": "one"}]')
    fs.pipe(f"{root}/old/extra.json", b"[]")
    uri = f"memory:/{root}"
    copies = []
    real_copy = storage._copy_tree
    monkeypatch.setattr(storage, "_copy_tree", lambda src, dest: (copies.append(dest), real_copy(src, dest)))

    first = storage.materialize(uri, tmp_path / "c")
    before = data_fingerprint({str(first / "topic.json")}, first)
    assert storage.materialize(uri, tmp_path / "c") == first and len(copies) == 1  # unchanged: the copy is reused

    fs.pipe(f"{root}/topic.json", b'[{"q": "one, edited"}]')
    fs.rm(f"{root}/old", recursive=True)
    again = storage.materialize(uri, tmp_path / "c")
    assert len(copies) == 2 and again == first
    assert (again / "topic.json").read_text() == '[{"q": "one, edited"}]' and not (again / "old").exists()
    assert data_fingerprint({str(again / "topic.json")}, again) != before
    assert [p.name for p in again.parent.iterdir()] == [again.name]  # no half copy or superseded copy left


@pytest.mark.slow
def test_an_edited_sample_in_an_s3_bucket_is_copied_again(tmp_path):
    """The same on S3 (moto): an object rewritten with the same size is seen by its modification time."""
    import time

    import boto3

    with s3_server() as bucket:
        s3 = boto3.client("s3")
        s3.put_object(Bucket=bucket, Key="data/topic.json", Body=b'{"q": "aaa"}')
        first = storage.materialize(f"s3://{bucket}/data", tmp_path)
        assert (first / "topic.json").read_text() == '{"q": "aaa"}'
        time.sleep(1.1)  # S3's modification times are to the second
        s3.put_object(Bucket=bucket, Key="data/topic.json", Body=b'{"q": "bbb"}')
        assert (storage.materialize(f"s3://{bucket}/data", tmp_path) / "topic.json").read_text() == '{"q": "bbb"}'
