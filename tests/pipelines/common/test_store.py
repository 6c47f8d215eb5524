"""The result store keeps going past a damaged shard: it is moved aside and its samples are redone."""

from __future__ import annotations

import logging

from llmrec.pipelines.common.store import ResultStore


def test_truncated_shard_is_quarantined_and_its_samples_are_not_done(tmp_path, caplog):
    store = ResultStore(tmp_path / "results")
    keep = store.write([{"sample_id": "a", "status": "ok"}])
    bad = store.write([{"sample_id": "b", "status": "ok"}, {"sample_id": "c", "status": "ok"}])
    path = tmp_path / "results" / bad
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # a copy cut short outside llmrec
    with caplog.at_level(logging.WARNING):
        assert store.finished_ids() == {"a"}
    assert store.shards() == [keep]
    quarantined = tmp_path / "results" / f"{bad}.corrupt"
    assert quarantined.read_bytes() == whole[: len(whole) // 2]  # kept for inspection
    assert f"{bad} is unreadable" in caplog.text and f"moved to {bad}.corrupt" in caplog.text
    assert "the next run redoes them" in caplog.text


# ---- typed shards ------------------------------------------------------------------------------------------------
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pydantic import Field  # noqa: E402

from llmrec.pipelines.common.store import SCHEMA  # noqa: E402
from llmrec.pipelines.record import Payload, RecordSchema  # noqa: E402


class ShardPayload(Payload):
    score: float | None = None
    count: int | None = None
    flag: bool | None = None
    tags: list[str] | None = None
    answers: dict[str, int | None] | None = Field(None)


SCHEMA_T = RecordSchema(ShardPayload, (), "shard-test")


def as_json_store_gave_it(record: dict) -> dict:
    """What the JSON shards (the older format) gave back for a record: the reference of a typed round trip."""
    return json.loads(json.dumps(record, sort_keys=True, default=str))


RECORDS = [
    {"sample_id": "a", "status": "ok", "error": None, "score": 1, "count": 3, "flag": True, "tags": ("x", "y"),
     "answers": {"q2": 1, "q1": None}, "setting": {"k": 1}, "outputs": {"ask": {"text": "hi", "prompt_tokens": 4}},
     "undeclared": {"kept": [1, 2]}},
    {"sample_id": "b", "status": "failed", "error": "boom", "failed_stage": "ask", "score": 0.25, "missing": ["text"]},
    {"sample_id": "c", "status": "over_context", "score": float("nan"), "prompt_tokens": 99},
]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_a_typed_shard_gives_back_the_records_as_written(tmp_path):
    store = ResultStore(tmp_path / "results", {"config": {"x": 1}}, SCHEMA_T)
    shard = store.write(RECORDS)
    table = pq.read_table(tmp_path / "results" / shard)
    assert table.schema.field("score").type == pa.float64() and table.schema.field("count").type == pa.int64()
    assert table.column("tags").to_pylist()[0] == '["x", "y"]'  # nested values: JSON text, as in samples.parquet
    back = store.load()
    for r in RECORDS:  # an int in the float column stays an int, absent keys stay absent, undeclared keys are kept
        assert _same(back[r["sample_id"]], as_json_store_gave_it(r)), r["sample_id"]
    assert store.provenances()[shard] == ({"config": {"x": 1}}, 2)


def test_old_json_shards_still_load_beside_typed_ones(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    old = [{"sample_id": "a", "status": "failed", "error": "x", "score": 0.5}, {"sample_id": "z", "status": "ok"}]
    table = pa.table({"sample_id": ["a", "z"], "status": ["failed", "ok"], "error": ["x", None],
                      "record": [json.dumps(r, sort_keys=True) for r in old], "written_at": [1.0, 1.0]}, schema=SCHEMA)
    buf = io.BytesIO()
    pq.write_table(table, buf)  # a shard as an older llmrec wrote it (no provenance, one JSON column)
    (root / "00000000000000000001-old.parquet").write_bytes(buf.getvalue())
    store = ResultStore(root, None, SCHEMA_T)
    assert store.finished_ids() == {"z"}
    store.write([RECORDS[0]])  # redone: the newer typed record supersedes the old failure
    back = store.load()
    assert back["z"] == {"sample_id": "z", "status": "ok"} and back["a"]["status"] == "ok"
    assert store.finished_ids() == {"a", "z"}
    assert store.compacted(["a", "z"]) is None  # an old shard: samples.parquet is built from the records


def test_plan_reads_only_the_index_columns(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    table = pa.table({"sample_id": ["a", "b"], "status": ["ok", "failed"], "error": [None, "x"],
                      "record": ["not json", "{"], "written_at": [1.0, 1.0]}, schema=SCHEMA)
    pq.write_table(table, root / "00000000000000000001-x.parquet")
    assert ResultStore(root).finished_ids() == {"a"}  # the records themselves are never parsed


def test_samples_parquet_is_the_typed_shards_compacted(tmp_path):
    store = ResultStore(tmp_path / "results", None, SCHEMA_T)
    store.write(RECORDS[:2])
    store.write([{**RECORDS[1], "status": "ok", "error": None, "score": 2}, RECORDS[2]])  # b redone
    order = ["c", "a", "b"]
    rows = [store.load()[s] for s in order]
    compacted = store.compacted(order)
    assert compacted.schema.equals(SCHEMA_T.arrow_schema(), check_metadata=True)
    built = SCHEMA_T.table(rows).to_pylist()  # what samples.parquet held when it was built from the records
    assert len(built) == 3 and all(_same(x, y) for x, y in zip(compacted.to_pylist(), built))
    assert compacted.column("score").to_pylist()[2] == 2.0 and compacted.column("status").to_pylist()[2] == "ok"
