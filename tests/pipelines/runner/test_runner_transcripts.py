"""The real runner stores the transcript of every sample: each engine call's request reference in the result store
and each distinct text once per run directory (``transcripts/``), written before the records that refer to them.
Resume keeps them without duplicates, --fresh drops them with the results, an S3 run directory works the same, and
`output.transcripts: false` stores results only. Toy benchmark and PrefEval on the fake engine."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.api import run_evaluation
from llmrec.pipelines.runner.run_config import RunConfig, load_run_config
from llmrec.rundir import RunDir
from llmrec.transcripts import TextStore, calls, resolve
from tests.pipelines.conftest import config
from tests.pipelines.runner.test_runner_toy import run_config


def with_output(cfg: RunConfig, **output) -> RunConfig:
    return cfg.model_copy(update={"output": cfg.output.model_copy(update=output)})


def text_rows(run_dir) -> tuple[int, set[str]]:
    """Rows in the run's text shards, and their distinct keys."""
    store = TextStore(RunDir(run_dir).transcripts)
    keys: list[str] = []
    for shard in store.shards():
        keys += pq.read_table(io.BytesIO(store.root.read_bytes(shard)), columns=["key"]).column("key").to_pylist()
    return len(keys), set(keys)


def expected_messages(rec: dict) -> list[list[str]]:
    """What the toy benchmark sends for a sample: the question, its follow-ups, the judge's question."""
    sid = rec["sample_id"]
    return [[rec["text"]], [f"follow-up 0 of {sid}"], [f"follow-up 1 of {sid}"], [f"judge the answer {'yes'!r}"]]


def check_transcripts(run_dir, n: int) -> dict[str, dict]:
    records = ResultStore(RunDir(run_dir).results).load()
    assert len(records) == n
    store = TextStore(RunDir(run_dir).transcripts)
    for rec in records.values():
        found = resolve(calls(rec), store)
        assert [(c.stage, c.role) for c in found] == [("ask", "subject"), ("follow", "subject"),
                                                      ("follow", "subject"), ("judge", "judge")]
        assert [[m["content"] for m in c.messages] for c in found] == expected_messages(rec)
        assert all(not c.missing and c.request["sampling"]["max_tokens"] == 4 for c in found)
    rows, keys = text_rows(run_dir)
    used = {m["text"] for r in records.values() for c in calls(r) for m in c.request["messages"]}
    assert rows == len(keys) == len(used) and keys == used  # each text once, none missing, none extra
    return records


def test_run_stores_every_call_and_each_text_once(tmp_path, local_ray):
    cfg = run_config(tmp_path, n=6, judged=True)
    cfg = cfg.model_copy(update={"judge": cfg.engine})
    first = run_evaluation(cfg)
    assert first.metrics["n_samples"] == 6 and first.metrics["failed"] == 0
    check_transcripts(first.run_dir, 6)
    # the judge's question is the same for every sample: one row, however many samples sent it
    rows, _ = text_rows(first.run_dir)
    assert rows == 6 * 3 + 1
    assert len(TextStore(RunDir(first.run_dir).transcripts).shards()) >= 2  # one per batch with new texts

    # resume after a kill that lost the last result shard (its texts were written first): the lost samples
    # are redone, their texts are not stored again
    results = RunDir(first.run_dir).results
    last = ResultStore(results).shards()[-1]
    lost = pq.read_table(results.local_path / last).num_rows
    results.delete(last)
    shards_before = TextStore(RunDir(first.run_dir).transcripts).shards()
    again = run_evaluation(cfg)
    assert again.stats["samples_new"] == lost and again.metrics == first.metrics
    check_transcripts(again.run_dir, 6)
    assert TextStore(RunDir(again.run_dir).transcripts).shards() == shards_before

    # --fresh: the results and the transcripts go together, then both are written anew
    fresh = run_evaluation(with_output(cfg, resume=False))
    assert fresh.stats["samples_new"] == 6
    assert not set(TextStore(RunDir(fresh.run_dir).transcripts).shards()) & set(shards_before)
    check_transcripts(fresh.run_dir, 6)
    # samples.parquet, what `llmrec report` and the viewer read, carries the references too
    table = pq.read_table(Path(fresh.run_dir) / RunDir.SAMPLES, columns=["outputs"]).to_pylist()
    assert all("request" in json.loads(r["outputs"])["judge"] for r in table)


def test_capture_can_be_switched_off(tmp_path, local_ray):
    out = run_evaluation(with_output(run_config(tmp_path, n=2, rounds=1), transcripts=False))
    records = ResultStore(RunDir(out.run_dir).results).load()
    assert all(c.request is None for r in records.values() for c in calls(r))
    assert TextStore(RunDir(out.run_dir).transcripts).shards() == []


@pytest.mark.slow
@pytest.mark.integration
def test_run_on_s3_stores_transcripts(tmp_path, local_ray):
    from tests.runtime.helpers import s3_keys, s3_server

    with s3_server() as bucket:
        cfg = run_config(tmp_path, n=4, judged=True)
        cfg = with_output(cfg.model_copy(update={"judge": cfg.engine}), dir=f"s3://{bucket}/runs", run_name="s3t",
                          cache_path=tmp_path / "cache.sqlite")
        first = run_evaluation(cfg)
        assert first.run_dir == f"s3://{bucket}/runs/s3t"
        assert any(k.startswith("runs/s3t/transcripts/texts-") for k in s3_keys(bucket, "runs/s3t/"))
        check_transcripts(first.run_dir, 4)
        shards = TextStore(RunDir(first.run_dir).transcripts).shards()
        again = run_evaluation(cfg)  # resumed: nothing new, nothing dropped
        assert again.stats["samples_new"] == 0 and TextStore(RunDir(first.run_dir).transcripts).shards() == shards
        run_evaluation(with_output(cfg, resume=False))
        assert not set(TextStore(RunDir(first.run_dir).transcripts).shards()) & set(shards)
        check_transcripts(first.run_dir, 4)


def test_prefeval_mcq_transcript_holds_the_preference_and_question(tmp_path, data_root, local_ray):
    cfg = load_run_config(config(tmp_path, topics=["travel_restaurant"], forms=["explicit"], turns=[2],
                                 methods=["zero-shot"], per_topic=2), ["output.cache=false"])
    out = run_evaluation(cfg, data_root)
    assert out.metrics and out.stats["samples_new"] == 2
    data = json.loads((data_root / "prefeval" / "benchmark_dataset" / "explicit_preference"
                       / "travel_restaurant.json").read_text())[0]
    records = ResultStore(RunDir(out.run_dir).results).load()
    rec = next(r for r in records.values() if r.get("preference") == data["preference"])
    found = resolve(calls(rec), TextStore(RunDir(out.run_dir).transcripts))
    assert [c.stage for c in found] == ["pref_reply", "answer"] and not any(c.missing for c in found)
    answer = found[-1]
    text = "\n".join(m["content"] for m in answer.messages)
    assert data["preference"] in text and data["question"] in text
    # the conversation as sent: system, the stated preference, the model's live reply, 2 inter-turn pairs, question
    assert [m["role"] for m in answer.messages][:3] == ["system", "user", "assistant"]
    assert answer.messages[2]["content"] == found[0].result["text"] and len(answer.messages) == 3 + 2 * 2 + 1
    assert answer.result["text"] == rec["output"]
