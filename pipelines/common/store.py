"""Per-run result store: parquet shards of finished samples, keyed by ``sample_id``.

The store lives in a local folder or under a storage URI (``s3://…``, see ``llmrec.storage``).
Every shard gets a unique, write-once name and is published atomically (local: temporary
name then rename; object store: one whole-object upload), so a kill at any moment leaves
either a whole shard or none. Loading de-duplicates by ``sample_id`` (the newest record wins:
a failed sample retried on resume supersedes its failure). A shard damaged outside llmrec (a
truncated copy) is moved aside by the run's writer (``writer=True``) to ``<shard>.corrupt`` with a warning and its
samples are redone; a reader (``llmrec compare``, ``rejudge``'s source, an export) changes nothing in the store: it
fails with a ``DataError`` naming the shard.

Each shard carries, in its parquet metadata, the provenance of its results (``pipelines.common.provenance``:
the result-determining config and the content fingerprint of the data read), so resume can take only the
shards produced from the config and data of the run at hand (``provenances``).

Shards are typed when the store is given the benchmark's record schema (``pipelines.record.RecordSchema``): one
column per declared field, as in ``samples.parquet`` (nested values as JSON text), plus ``written_at``, ``absent``
(declared fields the record lacks) and ``rest`` (JSON: undeclared keys, and values a typed column would not give
back as they were, e.g. an int in a float column). A record read back is the record written, as the JSON shards
(one ``record`` column of JSON text, the older format; still read, and written without a schema) gave it back.
``compacted`` builds ``samples.parquet``'s table from typed shards without re-encoding, and ``finished_ids`` (what
``plan`` and resume need) reads only the ``sample_id`` and ``status`` columns.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from llmrec.pipelines.record import cell, json_columns
from llmrec.errors import DataError
from llmrec.redact import redacted_errors
from llmrec.storage import Storage

log = logging.getLogger(__name__)

SCHEMA = pa.schema([
    ("sample_id", pa.string()),
    ("status", pa.string()),  # ok | failed | over_context
    ("error", pa.string()),
    ("record", pa.string()),  # JSON: the sample with its stage outputs and score fields
    ("written_at", pa.float64()),
])

FINAL = ("ok", "over_context")
PROVENANCE_KEY = b"llmrec.provenance"  # parquet metadata: JSON of what the shard's results were produced from
TYPED_KEY, TYPED = b"llmrec.store", b"typed"  # parquet metadata of a typed shard
_PY = {pa.string(): str, pa.int64(): int, pa.float64(): float, pa.bool_(): bool}
CORRUPT = ".corrupt"  # suffix of a quarantined shard


class ResultStore:
    def __init__(self, root: str | Path | Storage, provenance: dict | None = None, schema=None, writer: bool = True):
        """``provenance``: what this run's results are produced from, written with every shard. ``schema``: the
        benchmark's ``RecordSchema``: shards are typed (else one JSON ``record`` column). ``writer``: the run that
        owns the store (creates its folder, writes shards, quarantines a damaged one); False: a reader, which
        changes nothing."""
        self.root = Storage.of(root)
        self.writer = writer
        if writer:
            self.root.mkdir()
        self.provenance, self.schema = provenance, schema
        self._seen: dict[str, tuple[dict | None, int]] = {}  # shard → (provenance, finished records), by load()

    def write(self, records: list[dict]) -> str | None:
        """records: dicts with sample_id, status, error and the full sample. Returns the shard name."""
        if not records:
            return None
        if not self.writer:
            raise DataError(f"{self.root}: opened for reading; only the run writes its result store")
        # an error may quote the configured URL it failed on: its credentials go; what a model said stays as said
        records = redacted_errors(records)
        now = time.time()
        if self.schema is not None:
            table = self._typed(records, now)
        else:
            table = pa.table({
                "sample_id": [str(r["sample_id"]) for r in records],
                "status": [r.get("status", "ok") for r in records],
                "error": [r.get("error") for r in records],
                "record": [json.dumps(r, sort_keys=True, default=str) for r in records],
                "written_at": [now] * len(records),
            }, schema=SCHEMA)
        if self.provenance is not None:
            table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                                   PROVENANCE_KEY: json.dumps(self.provenance, sort_keys=True)})
        buf = io.BytesIO()
        # zstd: records of a shard repeat their transcript references (a long conversation's message keys)
        pq.write_table(table, buf, compression="zstd")
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        self.root.write_bytes(name, buf.getvalue())
        return name

    def _typed(self, records: list[dict], now: float) -> pa.Table:
        """A typed shard: the declared fields' columns (as ``samples.parquet`` types them), ``absent`` and ``rest``."""
        schema = self.schema.arrow_schema()
        marked = json_columns(schema)
        data: dict[str, list] = {f.name: [] for f in schema}
        kinds = [(f.name, data[f.name], f.name in marked, _PY.get(f.type), f.type) for f in schema]
        absent, rest = [], []
        for r in records:
            extra = {k: v for k, v in r.items() if k not in data}
            for name, column, as_json, kind, typ in kinds:
                v = r.get(name)
                if v is None:
                    column.append(None)
                elif as_json:
                    column.append(_stored(v))
                elif type(v) is kind:
                    column.append(v)
                else:  # e.g. an int in a float column: the column holds it as a float, ``rest`` gives it back as it was
                    extra[name] = v
                    column.append(cell(v, False, typ) if kind is float and type(v) is int else None)
            data["sample_id"][-1], data["status"][-1] = str(r["sample_id"]), r.get("status", "ok")  # the index
            absent.append([f.name for f in schema if f.name not in r])
            rest.append(_stored(extra) if extra else None)
        data.update(written_at=[now] * len(records), absent=absent, rest=rest)
        fields = [*schema, pa.field("written_at", pa.float64()), pa.field("absent", pa.list_(pa.string())),
                  pa.field("rest", pa.string())]
        return pa.Table.from_pydict(data, schema=pa.schema(fields, metadata={**schema.metadata, TYPED_KEY: TYPED}))

    def shards(self) -> list[str]:
        """Shard names in write order (names start with the write time in ns)."""
        return [n for n in self.root.list(".parquet") if not n.startswith(".")]

    def _tables(self, columns: list[str] | None = None):
        """(shard, its table: only ``columns`` when given) in write order; a damaged shard is quarantined (see
        ``_quarantine``). Records which shards hold finished results, and their provenance (``provenances``)."""
        self._seen = {}
        for shard in self.shards():
            data = self.root.read_bytes(shard)
            try:
                f = pq.ParquetFile(io.BytesIO(data))
                table = f.read(columns=None if columns is None else [c for c in columns if c in f.schema_arrow.names])
            except Exception as e:  # noqa: BLE001 - any decode error means a damaged shard
                if not self.writer:  # a reader leaves the store as it found it and says which shard it cannot use
                    raise DataError(f"{self.root}/{shard}: an unreadable result shard ({e}); nothing was changed. "
                                    "The run's next `llmrec run` moves it aside and redoes its samples") from None
                self._quarantine(shard, data, e)
                continue
            final = sum(s in FINAL for s in table.column("status").to_pylist())
            self._seen[shard] = (_provenance(table.schema.metadata), final)
            yield shard, table

    def all_records(self) -> list[dict]:
        """Every record of every shard (not only the newest per sample), in write order."""
        return [r for _, table in self._tables() for r in _records(table)]

    def load(self) -> dict[str, dict]:
        """sample_id → newest record."""
        latest: dict[str, dict] = {}
        for _, table in self._tables():
            for r in _records(table):
                latest[str(r["sample_id"])] = r
        return latest

    def compacted(self, sample_ids: list[str]):
        """``samples.parquet``'s table for ``sample_ids`` (in that order, each sample's newest row) taken from the
        typed shards as they are, or None when a shard is not typed (then the caller builds it from the records)."""
        if self.schema is None:
            return None
        names = self.schema.arrow_schema().names
        tables = [t for _, t in self._tables(names)]
        if not tables or any((t.schema.metadata or {}).get(TYPED_KEY) != TYPED for t in tables):
            return None
        try:
            whole = pa.concat_tables([t.replace_schema_metadata() for t in tables])
        except pa.ArrowInvalid:  # shards of different declarations (a payload changed between runs)
            return None
        row = {sid: i for i, sid in enumerate(whole.column("sample_id").to_pylist())}  # the newest one wins
        meta = {k: v for k, v in (tables[-1].schema.metadata or {}).items() if k not in (TYPED_KEY, PROVENANCE_KEY)}
        return whole.take(pa.array([row[s] for s in sample_ids if s in row], pa.int64())).replace_schema_metadata(meta)

    def provenances(self) -> dict[str, tuple[dict | None, int]]:
        """shard → (the provenance it was written with, None if it has none; its finished records), as of the
        last ``load`` (or ``finished_ids``)."""
        return dict(self._seen)

    def _quarantine(self, shard: str, data: bytes, error: Exception) -> None:
        """Move a shard that cannot be decoded (truncated or overwritten outside llmrec: our own writes
        are atomic) to ``<shard>.corrupt``, out of the store, and go on without it: its samples count
        as not done, so the next run redoes them. The bytes are kept for inspection."""
        self.root.write_bytes(f"{shard}{CORRUPT}", data)
        self.root.delete(shard)
        log.warning("result store shard %s/%s is unreadable (%s): moved to %s%s; its samples are not counted "
                    "as done and the next run redoes them", self.root, shard, error, shard, CORRUPT)

    def finished_ids(self) -> set[str]:
        """The samples whose newest record is finished (only the ``sample_id`` and ``status`` columns are read)."""
        latest: dict[str, str] = {}
        for _, table in self._tables(["sample_id", "status"]):
            latest.update(zip(table.column("sample_id").to_pylist(), table.column("status").to_pylist()))
        return {sid for sid, status in latest.items() if status in FINAL}

    def clear(self) -> None:
        if not self.writer:
            raise DataError(f"{self.root}: opened for reading; only the run clears its result store")
        for name in self.root.list(".parquet") + self.root.list(".tmp"):
            self.root.delete(name)


def _provenance(metadata: dict | None) -> dict | None:
    raw = (metadata or {}).get(PROVENANCE_KEY)
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _stored(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _records(table: pa.Table) -> list[dict]:
    """A shard's records as written (keys sorted, as JSON shards gave them back)."""
    if (table.schema.metadata or {}).get(TYPED_KEY) != TYPED:  # a JSON shard
        return [json.loads(rec) for rec in table.column("record").to_pylist()]
    marked = json_columns(table.schema)
    columns = table.to_pydict()  # column by column: faster than row dicts
    absent, rest = columns.pop("absent"), columns.pop("rest")
    del columns["written_at"]
    for k in marked:
        columns[k] = [None if v is None else json.loads(v) for v in columns[k]]
    names = sorted(columns)
    out = []
    for i, row in enumerate(zip(*(columns[k] for k in names))):
        r = dict(zip(names, row))
        for k in absent[i] or ():
            del r[k]
        if rest[i] is not None:
            r.update(json.loads(rest[i]))
            r = dict(sorted(r.items()))
        out.append(r)
    return out
