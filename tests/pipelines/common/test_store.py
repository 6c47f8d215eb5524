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
