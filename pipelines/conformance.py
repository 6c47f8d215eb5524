"""Checking a benchmark against the contract: the core's members, every declared capability's members and
signatures, the names it gives as keys, and its stages' declared reads / writes — at registration (``llmrec
list``), before any model call, each failure one line naming the benchmark, the member and what is expected."""

from __future__ import annotations

import inspect
from typing import Any

from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.capabilities import CAPABILITIES, Member
from llmrec.pipelines.core import CORE_ATTRIBUTES, CORE_METHODS, Benchmark
from llmrec.pipelines.parts import BenchmarkConfig
from llmrec.pipelines.record import Payload, RecordSchema

_CORE_TYPES = (("name", "a str", lambda v: isinstance(v, str)),
               ("config_cls", "a BenchmarkConfig subclass",
                lambda v: isinstance(v, type) and issubclass(v, BenchmarkConfig)),
               ("payload", "a Payload subclass (pipelines/record.py)",
                lambda v: isinstance(v, type) and issubclass(v, Payload)))
_CORE_ARITY = {"build_samples": 2, "stages": 1, "score": 2}


def check_benchmark(bench: object, where: str) -> None:
    """Fail naming every member ``bench`` lacks or gets wrong (a ConfigError, one line)."""
    problems = []
    if not isinstance(bench, Benchmark):
        problems.append("not a subclass of llmrec.pipelines.protocol.Benchmark")  # where benchmarks import it
    missing = [m for m in CORE_ATTRIBUTES if not hasattr(bench, m)]
    missing += [m for m in CORE_METHODS if getattr(type(bench), m, None) in (None, getattr(Benchmark, m))]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    problems += _core_problems(bench, missing)
    problems += _capability_problems(bench)
    if not problems:
        problems += record_schema(bench).problems()
        problems += _key_problems(bench)
        problems += _default_stage_problems(bench)
    if problems:
        kind = type(bench)
        raise ConfigError(f"benchmark {where} ({kind.__module__}.{kind.__qualname__}) does not conform to the protocol: "
                          f"{'; '.join(problems)}")


def _core_problems(bench: object, missing: list[str]) -> list[str]:
    out = [f"{attr} must be {want}" for attr, want, ok in _CORE_TYPES
           if attr not in missing and not ok(getattr(bench, attr))]
    return out + [p for meth, n in _CORE_ARITY.items() if meth not in missing
                  for p in _arity_problems(meth, getattr(bench, meth, None), n)]


def _capability_problems(bench: object) -> list[str]:
    """Each declared capability's members as its ``Member`` says; a capability's member defined without declaring
    the capability would never be called (callers go through the capability), so that fails too."""
    out = []
    for cap, members in CAPABILITIES.items():
        if isinstance(bench, cap):
            out += [p for m in members for p in _member_problems(cap, m, getattr(bench, m.name))]
            continue
        stray = [m.name for m in members if hasattr(bench, m.name)]
        if stray:
            out.append(f"defines {', '.join(stray)} of the capability {cap.__name__} without declaring it "
                       f"(subclass {caps.__name__}.{cap.__name__})")
    return out


def _member_problems(cap: type, m: Member, value: Any) -> list[str]:
    where = f"{cap.__name__}.{m.name}"
    if m.ok is not None:
        return [] if m.ok(value) else [f"{where} must be {m.want}"]
    if m.arity is None or (m.nullable and value is None):
        return []
    return _arity_problems(where, value, m.arity)


def _arity_problems(where: str, fn: Any, n: int) -> list[str]:
    """``fn`` is called with ``n`` positional arguments."""
    if not callable(fn):
        return [f"{where} must be callable"]
    try:
        inspect.signature(fn).bind(*[None] * n)
    except TypeError:
        return [f"{where}{inspect.signature(fn)} must take {n} positional argument(s)"]
    return []


def _key_problems(bench: Benchmark) -> list[str]:
    """Names the benchmark gives as keys: group and cluster keys among its declared record fields, protocol
    keys among its config's fields (a typo would otherwise drop the option from the protocol record)."""
    fields = record_schema(bench).fields
    out = [f"group key '{k}' is not a declared field" for k in caps.group_keys(bench) if k not in fields]
    key = caps.cluster_key(bench)
    if key is not None and key not in fields:
        out.append(f"cluster_key '{key}' is not a declared field")
    options = bench.config_cls.model_fields
    out += [f"protocol key '{k}' is not a field of {bench.config_cls.__name__} (fields: {', '.join(options)})"
            for k in caps.protocol_keys(bench) if k not in options]
    return out


def record_schema(bench: Benchmark) -> RecordSchema:
    """The benchmark's declared record (built once per benchmark object)."""
    schema = bench.__dict__.get("_record_schema")
    if schema is None:
        schema = RecordSchema(bench.payload, caps.transient(bench), bench.name)
        bench.__dict__["_record_schema"] = schema
    return schema


def stage_problems(bench: Benchmark, cfg: BenchmarkConfig) -> list[str]:
    """Each stage's ``reads`` / ``writes`` against the benchmark's declared record, for this config."""
    schema = record_schema(bench)
    return [p for stage in bench.stages(cfg) for p in schema.stage_problems(stage)]


def check_stages(bench: Benchmark, cfg: BenchmarkConfig) -> None:
    """Fail (ConfigError) before any model call when a stage reads or writes an undeclared field."""
    problems = stage_problems(bench, cfg)
    if problems:
        raise ConfigError(f"benchmark '{bench.name}': {'; '.join(problems)}")


def judge_stage_names(bench: Benchmark, cfg: BenchmarkConfig) -> list[str]:
    """The benchmark's ``judge_stages`` that this config runs, in stage order."""
    judged = caps.judge_stages(bench)
    return [s.name for s in bench.stages(cfg) if s.name in judged]


def _default_stage_problems(bench: Benchmark) -> list[str]:
    """At registration: the stages of the benchmark's default config (when its config has defaults for
    every field; ``plan`` checks the run's own config again)."""
    try:
        cfg = bench.config_cls.model_validate({"name": bench.name})
        return stage_problems(bench, cfg)
    except Exception:  # noqa: BLE001 - a config with required fields (or stages that need data) is checked at plan
        return []


def protocol_record(bench: Benchmark, cfg: BenchmarkConfig) -> dict[str, Any]:
    """The config keys a run records in its MLflow ``protocol`` tag: the benchmark's ``protocol_keys``
    (the options that change what is measured, e.g. a deliberate difference from the reference)."""
    keys = caps.protocol_keys(bench)
    return {k: v for k, v in cfg.model_dump(mode="json").items() if k in keys}
