"""The per-sample record: the runner's own fields plus the payload each benchmark declares.

A sample travels as a plain dict (JSON-able, so Ray moves it cheaply and stages read it by key), but its keys and
value types are declared and checked:

- :class:`Record` — the runner's fields: ``sample_id``, ``setting`` (one flat mapping: the sample's values of the
  benchmark's ``group_keys``), the prefix hint (``prefix_key``, ``prefix_len``), ``status``,
  the error (``error``, ``failed_stage``, ``missing``), ``prompt_tokens``, ``truncation_steps`` and ``outputs`` (every
  engine call's ``Result``, per stage).
- the benchmark's **payload**, a :class:`Payload` subclass (``extra="forbid"``): every field its ``build_samples``
  sets, its stages write and its ``score`` adds. A field a later stage fills defaults to None.
- transient inputs: keys starting with ``_`` that the benchmark lists in ``HasTransient.transient`` (rendering inputs
  such as long conversations or templates). They reach the stages and are never stored.

:class:`RecordSchema` checks a built sample (an undeclared key or a wrong type fails naming the sample and the field
path) and each stage's or ``score``'s output before it is merged, and gives ``samples.parquet`` its typed columns.
"""

from __future__ import annotations

import json
import logging
import types
import typing
from functools import cached_property
from typing import Any, Literal, Union

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

log = logging.getLogger(__name__)

TRANSIENT_PREFIX = "_"
ASSETS_KEY = "_assets"
"""Transient key under which stages find the benchmark's shared read-only assets (set by the runner)."""


class Payload(BaseModel):
    """Base of a benchmark's per-sample payload. Subclass it and declare every field (with its type) that
    ``build_samples`` sets, a stage writes or ``score`` adds; fields filled after ``build_samples`` default to None."""

    model_config = ConfigDict(extra="forbid")


class Record(BaseModel):
    """The runner's fields of a sample (a benchmark's payload may not reuse these names)."""

    model_config = ConfigDict(extra="forbid")

    sample_id: str = Field(description="stable id, unique in the run (the join key of resume and compare)")
    setting: dict[str, str | int | float | bool | None] | None = Field(
        None, description="the sample's setting: its values of the benchmark's group_keys (set by the runner; what "
                          "MLflow child runs, compare and report split by)")
    prefix_key: str | None = Field(None, description="samples sharing it share a prompt prefix (routing hint)")
    prefix_len: int | None = Field(None, description="a size of the shared prefix: longest first in a group")
    status: Literal["ok", "failed", "over_context"] = "ok"
    error: str | None = Field(None, description="why the sample failed (redacted engine or stage message)")
    failed_stage: str | None = Field(None, description="the stage (or 'score') the sample failed in")
    missing: list[str] | None = Field(None, description="fields a stage reads that the sample lacked")
    prompt_tokens: int | None = Field(None, description="prompt tokens of the sample's main call (a stage may "
                                                        "write it; an over-context failure sets it)")
    truncation_steps: dict[str, int] | None = Field(None, description="shrink steps per stage")
    outputs: dict[str, Any] | None = Field(None, description="per stage: the engine's Result (a list for several)")
    jury: dict[str, dict[str, Any]] | None = Field(None, description="a jury's run: per judge (its label), the "
                                                                  "fields its judge stages wrote")


RECORD_FIELDS = frozenset(Record.model_fields)
STAGE_WRITABLE_RECORD_FIELDS = frozenset({"prompt_tokens"})


class RecordError(ValueError):
    """A sample or a stage output that does not match the record's declaration (the message names the field)."""


def _problem(e: ValidationError, prefix: str) -> str:
    err = e.errors()[0]
    path = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{path}: {err['msg']} (got {_short(err.get('input'))}){more}"


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


_SCALARS: dict[type, pa.DataType] = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}


def arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """The parquet column type of a declared field: (type, stored as JSON text). ``X | None`` is a nullable X;
    ``Literal`` of strings is a string; ``int | float`` a float; anything nested (lists, dicts, models, other
    unions) is JSON text."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return arrow_type(args[0])
        if set(args) == {int, float}:
            return pa.float64(), False
        return pa.string(), True
    if origin is Literal:
        kinds = {type(a) for a in typing.get_args(annotation)}
        return (_SCALARS[kinds.pop()], False) if len(kinds) == 1 and next(iter(kinds)) in _SCALARS else (pa.string(), True)
    if typing.get_origin(annotation) is typing.Annotated:
        return arrow_type(typing.get_args(annotation)[0])
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    return pa.string(), True


class RecordSchema:
    """The declared record of one benchmark: its payload model, its transient keys and the runner's fields."""

    def __init__(self, payload: type[Payload], transient: tuple[str, ...], owner: str):
        self.payload, self.transient, self.owner = payload, frozenset(transient) | {ASSETS_KEY}, owner
        self._adapters: dict[str, TypeAdapter] = {}

    @cached_property
    def fields(self) -> dict[str, Any]:
        """Every stored field → its annotation (the runner's fields first, then the payload's)."""
        out = {k: f.annotation for k, f in Record.model_fields.items()}
        out.update({k: f.annotation for k, f in self.payload.model_fields.items()})
        return out

    def problems(self) -> list[str]:
        """What is wrong with the declaration itself (checked once, at registration)."""
        out = []
        clash = sorted(RECORD_FIELDS & set(self.payload.model_fields))
        if clash:
            out.append(f"payload {self.payload.__name__} redeclares the runner's record field(s) {clash}")
        bad = sorted(k for k in self.transient - {ASSETS_KEY} if not k.startswith(TRANSIENT_PREFIX))
        if bad:
            out.append(f"transient keys must start with '{TRANSIENT_PREFIX}': {bad}")
        return out

    def stage_problems(self, stage) -> list[str]:
        """A stage's ``reads`` must be declared fields or transient keys; its ``writes`` payload fields."""
        out = []
        unknown = [k for k in stage.reads if k not in self.fields and k not in self.transient]
        if unknown:
            out.append(f"stage '{stage.name}' reads undeclared field(s) {unknown}")
        bad = [k for k in stage.writes if k not in self.payload.model_fields and k not in STAGE_WRITABLE_RECORD_FIELDS]
        if bad:
            out.append(f"stage '{stage.name}' writes field(s) {bad} that are not in payload {self.payload.__name__}")
        return out

    def check_built(self, sample: dict) -> None:
        """A sample from ``build_samples``: the runner's fields and the payload validate, transient keys are
        declared. Raises :class:`RecordError` naming the sample and the field path."""
        sid = sample.get("sample_id")
        where = f"benchmark '{self.owner}' built sample {sid!r}"
        transient = [k for k in sample if k.startswith(TRANSIENT_PREFIX)]
        undeclared = [k for k in transient if k not in self.transient]
        if undeclared:
            raise RecordError(f"{where}: transient key(s) {undeclared} are not in the benchmark's `transient` "
                              f"({sorted(self.transient - {ASSETS_KEY})})")
        own = {k: v for k, v in sample.items() if k in RECORD_FIELDS}
        rest = {k: v for k, v in sample.items() if k not in RECORD_FIELDS and not k.startswith(TRANSIENT_PREFIX)}
        try:
            Record.model_validate(own)
        except ValidationError as e:
            raise RecordError(f"{where}: {_problem(e, 'record')}") from None
        try:
            self.payload.model_validate(rest)
        except ValidationError as e:
            raise RecordError(f"{where}: {_problem(e, 'payload')}"
                              + ("" if e.errors()[0]["type"] != "extra_forbidden" else
                                 f" — declare it in {self.payload.__module__}.{self.payload.__name__}")) from None

    def check_fields(self, fields: dict) -> str | None:
        """Values a stage or ``score`` returns (already checked to be declared): the first type problem, or None."""
        for k, v in fields.items():
            if k not in self.fields:
                return f"payload.{k}: not a field of {self.payload.__name__} (declare it there)"
            try:
                self._adapter(k).validate_python(v)
            except ValidationError as e:
                return _problem(e, ("record." if k in RECORD_FIELDS else "payload.") + k)
        return None

    def _adapter(self, field: str) -> TypeAdapter:
        if field not in self._adapters:
            info = Record.model_fields.get(field) or self.payload.model_fields[field]
            self._adapters[field] = TypeAdapter(typing.Annotated[info.annotation, info])
        return self._adapters[field]

    def arrow_schema(self) -> pa.Schema:
        """``samples.parquet``'s columns: one per declared field, typed; nested values as JSON text (marked in the
        field's metadata ``llmrec.json``)."""
        cols = []
        for name, ann in self.fields.items():
            typ, as_json = arrow_type(ann)
            cols.append(pa.field(name, typ, nullable=True, metadata={b"llmrec.json": b"1"} if as_json else None))
        return pa.schema(cols, metadata={b"llmrec.payload": f"{self.payload.__module__}.{self.payload.__name__}".encode()})

    def warn_undeclared(self, rows: list[dict]) -> None:
        """Log the fields of ``rows`` that ``samples.parquet`` leaves out (not declared)."""
        undeclared = sorted({k for r in rows for k in r if k not in self.fields and not k.startswith(TRANSIENT_PREFIX)})
        if undeclared:  # e.g. rows a baseline built, or stored by an older version: not lost silently
            log.warning("%s: field(s) %s are not declared in %s and are left out of samples.parquet (the result "
                        "store keeps them)", self.owner, undeclared, self.payload.__name__)

    def table(self, rows: list[dict]) -> pa.Table:
        """The stored rows as a typed table (JSON text for nested fields; a field a row lacks is null)."""
        schema = self.arrow_schema()
        self.warn_undeclared(rows)
        data = {}
        for f in schema:
            as_json = f.metadata is not None and f.metadata.get(b"llmrec.json") == b"1"
            data[f.name] = [cell(r.get(f.name), as_json, f.type) for r in rows]
        return pa.Table.from_pydict(data, schema=schema)


def cell(v: Any, as_json: bool, typ: pa.DataType) -> Any:
    """A value as its ``samples.parquet`` column stores it (JSON text when ``as_json``; ints in a float column as floats)."""
    if v is None:
        return None
    if as_json:
        return json.dumps(v)
    if typ == pa.float64() and not isinstance(v, bool):
        return float(v)
    return v


def json_columns(schema: pa.Schema) -> set[str]:
    """The columns of a ``samples.parquet`` that hold JSON text (declared nested fields)."""
    return {f.name for f in schema if f.metadata is not None and f.metadata.get(b"llmrec.json") == b"1"}


def read_rows(path) -> list[dict]:
    """The rows of a ``samples.parquet`` (a path or a readable binary file): nulls as None, JSON-text columns decoded to lists and dicts. A file
    written before columns were typed carries no JSON marks: there, text that parses as a JSON list or
    object is decoded. Raises OSError / ValueError (pyarrow's) on a file that is not parquet."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    marked = json_columns(table.schema)
    typed = b"llmrec.payload" in (table.schema.metadata or {})
    rows = table.to_pylist()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and v != v:
                r[k] = None
            elif isinstance(v, str) and (k in marked or (not typed and v[:1] in "[{")):
                try:
                    r[k] = json.loads(v)
                except json.JSONDecodeError:
                    if k in marked:
                        raise ValueError(f"{path}: column {k!r} of sample {r.get('sample_id')!r} holds text that "
                                         "is not JSON") from None
    return rows
