"""Samples cross Ray as themselves: one pickled cell per prefix group, no JSON round trip on the way."""

from __future__ import annotations

from llmrec.pipelines.runner.worker import decode, encode, pack


def test_a_group_crosses_as_its_records():
    group = [{"sample_id": "a", "n": 1, "x": 0.1, "nested": {"k": [1, 2]}, "_conversation": [{"role": "user"}]},
             {"sample_id": "b", "status": "ok", "outputs": None}]
    out = encode([group, group[:1]], {"worker_s": 1.0})
    assert out["group"].dtype == object and isinstance(out["group"][0], bytes)  # whole bytes, not fixed-width
    assert decode(out) == [group, group[:1]]
    assert decode({"group": [pack(group)]}) == [group]
