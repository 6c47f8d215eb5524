"""The declared per-sample record (pipelines/record.py): each benchmark's payload model, stage reads/writes
checked at registration, built samples and stage outputs validated naming the field, a read-only view for
render, and typed samples.parquet columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.protocol import LLMStage, check_benchmark, record_schema
from llmrec.pipelines.record import RecordError, read_rows
from llmrec.pipelines.registry import BENCHMARKS, benchmark_config, get_benchmark
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.pipelines.toy.benchmark import NAME, Toy


def _toy():
    return get_benchmark(NAME)


def _run(bench, cfg_data: dict, samples=None):
    cfg = benchmark_config({"name": NAME, **cfg_data})
    eng = build_engine({"type": "fake", "default": "yes"})
    return process_samples(bench, cfg, samples or bench.build_samples(cfg, None), lambda r: eng)


def test_every_benchmark_declares_its_payload_and_its_stages_read_and_write_declared_fields():
    for name in BENCHMARKS.names():
        bench = BENCHMARKS.get(name)
        schema = record_schema(bench)
        assert schema.problems() == [] and set(bench.group_keys) <= set(schema.fields), name
        assert bench.payload.model_config.get("extra") == "forbid", name


def test_a_stage_writing_an_undeclared_field_is_refused_at_registration():
    class Sloppy(Toy):
        def stages(self, cfg):
            return [LLMStage("ask", lambda s: None, lambda s, r: {}, reads=("txet",), writes=("anwser",))]

    with pytest.raises(ConfigError) as e:
        check_benchmark(Sloppy(), "sloppy")
    msg = str(e.value)
    assert "stage 'ask' reads undeclared field(s) ['txet']" in msg
    assert "stage 'ask' writes field(s) ['anwser'] that are not in payload ToyPayload" in msg


def test_a_built_sample_with_an_undeclared_key_or_a_wrong_type_names_the_sample_and_the_field():
    schema = record_schema(_toy())
    with pytest.raises(RecordError, match=r"sample 'toy-0': payload\.colour: Extra inputs are not permitted .* "
                                          r"declare it in tests\.pipelines\.toy\.benchmark\.ToyPayload"):
        schema.check_built({"sample_id": "toy-0", "index": 0, "kind": "even", "colour": "red"})
    with pytest.raises(RecordError, match=r"sample 'toy-1': payload\.index: Input should be a valid integer"):
        schema.check_built({"sample_id": "toy-1", "index": "one", "kind": "odd"})
    with pytest.raises(RecordError, match=r"record\.status: Input should be 'ok', 'failed' or 'over_context'"):
        schema.check_built({"sample_id": "toy-2", "index": 2, "kind": "even", "status": "done"})
    with pytest.raises(RecordError, match=r"transient key\(s\) \['_notes'\]"):
        schema.check_built({"sample_id": "toy-3", "index": 3, "kind": "odd", "_notes": "x"})


def test_the_runner_refuses_a_benchmark_that_builds_undeclared_fields(tmp_path):
    from llmrec.pipelines.runner import execution
    from tests.pipelines.runner.test_runner_toy import run_config

    orig = Toy.build_samples
    try:
        Toy.build_samples = lambda self, cfg, d: [dict(s, extra=1) for s in orig(self, cfg, d)]
        with pytest.raises(DataError, match="built sample 'toy-0': payload.extra: Extra inputs are not permitted"):
            execution.build_samples(run_config(tmp_path, n=2))
    finally:
        Toy.build_samples = orig


def test_a_stage_output_of_the_wrong_type_fails_that_sample_naming_the_field_path():
    bench = _toy()
    stages = bench.stages(benchmark_config({"name": NAME, "n": 2, "rounds": 0}))
    typo = type(stages[0])(**{**stages[0].__dict__, "accept": lambda s, r: {"answer": ["not", "a", "string"]}})
    bad = type("B", (Toy,), {"stages": lambda self, c: [typo]})()
    got = _run(bad, {"n": 2, "rounds": 0})
    assert all(s["status"] == "failed" and s["failed_stage"] == "ask" for s in got)
    assert "payload.answer: Input should be a valid string" in got[0]["error"]
    assert "answer" not in got[0]  # nothing of a rejected output is merged


def test_render_sees_a_read_only_sample():
    bench = _toy()
    stages = bench.stages(benchmark_config({"name": NAME, "n": 1, "rounds": 0}))

    def writes_in_render(s):
        s["answer"] = "sneaked"
        return None

    sneaky = type(stages[0])(**{**stages[0].__dict__, "render": writes_in_render})
    [s] = _run(type("B", (Toy,), {"stages": lambda self, c: [sneaky]})(), {"n": 1, "rounds": 0})
    assert s["status"] == "failed" and "render raised TypeError" in s["error"] and "answer" not in s


def test_samples_parquet_has_one_typed_column_per_declared_field(tmp_path):
    bench = _toy()
    rows = _run(bench, {"n": 3, "long": [], "rounds": 1})
    path = tmp_path / "samples.parquet"
    pq.write_table(record_schema(bench).table(rows), path)
    schema = pq.read_schema(path)
    types = {f.name: f.type for f in schema}
    assert types["index"] == pa.int64() and types["correct"] == pa.bool_() and types["answer"] == pa.string()
    assert types["prompt_tokens"] == pa.int64() and types["status"] == pa.string()
    assert schema.field("follow_ups").metadata == {b"llmrec.json": b"1"}  # nested: JSON text, marked
    assert set(types) == set(record_schema(bench).fields)  # every declared field, set or not
    back = {r["sample_id"]: r for r in read_rows(path)}
    assert back["toy-0"]["follow_ups"] == ["yes"] and back["toy-0"]["verdict"] is None
    assert back["toy-1"]["outputs"]["ask"]["text"] == "yes"


def test_the_runner_gives_each_sample_its_setting_as_one_flat_mapping(tmp_path):
    from llmrec.pipelines.protocol import setting_of
    from llmrec.pipelines.runner import execution
    from tests.pipelines.runner.test_runner_toy import run_config

    bench, samples, _ = execution.build_samples(run_config(tmp_path, n=2))
    assert [s["setting"] for s in samples] == [{"kind": "even"}, {"kind": "odd"}]
    assert setting_of(bench, samples[1]) == "kind=odd"
    stored = {"sample_id": "s", "setting": {"b": 1, "a": 2}}  # read back key-sorted: labelled in group_keys order
    assert setting_of(type("B", (), {"group_keys": ("b", "a")})(), stored) == "b=1,a=2"
    assert setting_of(bench, {"sample_id": "old", "kind": "even"}) == "kind=even"  # stored before records had one


def test_a_row_field_nobody_declared_is_named_in_a_warning_not_dropped_silently(caplog):
    schema = record_schema(_toy())
    table = schema.table([{"sample_id": "b-1", "index": 1, "kind": "odd", "status": "ok", "score_of_a_baseline": 3}])
    assert "score_of_a_baseline" not in table.column_names and table.num_rows == 1
    assert "field(s) ['score_of_a_baseline'] are not declared in ToyPayload" in caplog.text
