"""Per-run result store: parquet shards of finished samples, keyed by ``sample_id``.

Each shard is written to a temporary name and renamed into place, so a kill at any
moment leaves either a whole shard or none. Loading de-duplicates by ``sample_id``
(the newest record wins: a failed sample retried on resume supersedes its failure).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from llmrec.errors import DataError

SCHEMA = pa.schema([
    ("sample_id", pa.string()),
    ("status", pa.string()),  # ok | failed | over_context
    ("error", pa.string()),
    ("record", pa.string()),  # JSON: the sample with its stage outputs and score fields
    ("written_at", pa.float64()),
])

FINAL = ("ok", "over_context")


class ResultStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, records: list[dict]) -> Path | None:
        """records: dicts with sample_id, status, error and the full sample."""
        if not records:
            return None
        now = time.time()
        table = pa.table({
            "sample_id": [str(r["sample_id"]) for r in records],
            "status": [r.get("status", "ok") for r in records],
            "error": [r.get("error") for r in records],
            "record": [json.dumps(r, sort_keys=True, default=str) for r in records],
            "written_at": [now] * len(records),
        }, schema=SCHEMA)
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.root / f".{name}.tmp"
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / name)
        return self.root / name

    def shards(self) -> list[Path]:
        return sorted(p for p in self.root.glob("*.parquet") if not p.name.startswith("."))

    def load(self) -> dict[str, dict]:
        """sample_id → newest record."""
        latest: dict[str, dict] = {}
        for shard in self.shards():
            try:
                table = pq.read_table(shard)
            except Exception as e:  # noqa: BLE001
                raise DataError(f"result store shard {shard} is unreadable: {e}") from e
            for rec in table.column("record").to_pylist():
                r = json.loads(rec)
                latest[str(r["sample_id"])] = r
        return latest

    def finished_ids(self) -> set[str]:
        return {sid for sid, r in self.load().items() if r.get("status") in FINAL}

    def clear(self) -> None:
        for p in self.root.glob("*.parquet"):
            p.unlink()
        for p in self.root.glob(".*.tmp"):
            p.unlink()
