"""Per-run result store: parquet shards of finished samples, keyed by ``sample_id``.

The store lives in a local folder or under a storage URI (``s3://…``, see ``llmrec.storage``).
Every shard gets a unique, write-once name and is published atomically (local: temporary
name then rename; object store: one whole-object upload), so a kill at any moment leaves
either a whole shard or none. Loading de-duplicates by ``sample_id`` (the newest record wins:
a failed sample retried on resume supersedes its failure). A shard damaged outside llmrec (a
truncated copy) is moved aside to ``<shard>.corrupt`` with a warning and its samples are redone.
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
CORRUPT = ".corrupt"  # suffix of a quarantined shard


class ResultStore:
    def __init__(self, root: str | Path | Storage):
        self.root = Storage.of(root)
        self.root.mkdir()

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
        return latest

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
