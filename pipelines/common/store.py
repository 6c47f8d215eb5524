"""Per-run result store: parquet shards of finished samples, keyed by ``sample_id``.

The store lives in a local folder or under a storage URI (``s3://…``, see ``llmrec.storage``).
Every shard gets a unique, write-once name and is published atomically (local: temporary
name then rename; object store: one whole-object upload), so a kill at any moment leaves
either a whole shard or none. Loading de-duplicates by ``sample_id`` (the newest record wins:
a failed sample retried on resume supersedes its failure). A shard damaged outside llmrec (a
truncated copy) is moved aside to ``<shard>.corrupt`` with a warning and its samples are redone.

Each shard carries, in its parquet metadata, the provenance of its results (``pipelines.common.provenance``:
the result-determining config and the content fingerprint of the data read), so resume can take only the
shards produced from the config and data of the run at hand (``provenances``).
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

from llmrec.redact import redacted
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
CORRUPT = ".corrupt"  # suffix of a quarantined shard


class ResultStore:
    def __init__(self, root: str | Path | Storage, provenance: dict | None = None):
        """``provenance``: what this run's results are produced from, written with every shard."""
        self.root = Storage.of(root)
        self.root.mkdir()
        self.provenance = provenance
        self._seen: dict[str, tuple[dict | None, int]] = {}  # shard → (provenance, finished records), by load()

    def write(self, records: list[dict]) -> str | None:
        """records: dicts with sample_id, status, error and the full sample. Returns the shard name."""
        if not records:
            return None
        records = redacted(records)  # what is stored carries no credentials (e.g. in an engine's error URL)
        now = time.time()
        table = pa.table({
            "sample_id": [str(r["sample_id"]) for r in records],
            "status": [r.get("status", "ok") for r in records],
            "error": [r.get("error") for r in records],
            "record": [json.dumps(r, sort_keys=True, default=str) for r in records],
            "written_at": [now] * len(records),
        }, schema=SCHEMA)
        if self.provenance is not None:
            table = table.replace_schema_metadata({PROVENANCE_KEY: json.dumps(self.provenance, sort_keys=True)})
        buf = io.BytesIO()
        # zstd: records of a shard repeat their transcript references (a long conversation's message keys)
        pq.write_table(table, buf, compression="zstd")
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        self.root.write_bytes(name, buf.getvalue())
        return name

    def shards(self) -> list[str]:
        """Shard names in write order (names start with the write time in ns)."""
        return [n for n in self.root.list(".parquet") if not n.startswith(".")]

    def load(self) -> dict[str, dict]:
        """sample_id → newest record. A damaged shard is quarantined (see ``_quarantine``)."""
        latest: dict[str, dict] = {}
        self._seen = {}
        for shard in self.shards():
            data = self.root.read_bytes(shard)
            try:
                table = pq.read_table(io.BytesIO(data))
            except Exception as e:  # noqa: BLE001 - any decode error means a damaged shard
                self._quarantine(shard, data, e)
                continue
            for rec in table.column("record").to_pylist():
                r = json.loads(rec)
                latest[str(r["sample_id"])] = r
            final = sum(s in FINAL for s in table.column("status").to_pylist())
            self._seen[shard] = (_provenance(table.schema.metadata), final)
        return latest

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
        return {sid for sid, r in self.load().items() if r.get("status") in FINAL}

    def clear(self) -> None:
        for name in self.root.list(".parquet") + self.root.list(".tmp"):
            self.root.delete(name)


def _provenance(metadata: dict | None) -> dict | None:
    raw = (metadata or {}).get(PROVENANCE_KEY)
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
