"""Request cache: a repeated request is answered from disk.

Key = sha256 of (engine identity, messages, sampling params, constraint). Requests that
sample (temperature > 0) without a fixed seed are not cached. Failed results are never
stored, nor a result's rendered ``prompt_text`` (a long conversation's prompt in every row; a hit's request
reference still names its messages, see ``llmrec.transcripts``). The cache speaks a batch API (``get_many`` / ``put_many``); in a run, one service
actor on the driver's node owns the sqlite file and every engine actor, on any node, uses it
through ``cache_service.RemoteRequestCache``. A local ``RequestCache`` (WAL mode) serves
single-process use.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from llmrec.serving.engine import run_facts
from llmrec.types import Request, Result


def cache_key(identity: dict, request: Request) -> str:
    blob = json.dumps({"engine": identity, "request": request.cache_payload()}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def cacheable(request: Request) -> bool:
    return request.sampling.temperature == 0 or request.sampling.seed is not None


class RequestCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
        self._conn.commit()

    def get(self, key: str) -> Result | None:
        with self._lock:
            row = self._conn.execute("SELECT result FROM responses WHERE key=?", (key,)).fetchone()
        return Result.model_validate_json(row[0]) if row else None

    def put(self, key: str, result: Result) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, _stored(result)))
            self._conn.commit()

    def get_many(self, keys: list[str]) -> dict[str, Result]:
        out: dict[str, Result] = {}
        with self._lock:
            for i in range(0, len(keys), 500):  # stay under sqlite's bound-parameter limit
                chunk = keys[i: i + 500]
                marks = ",".join("?" * len(chunk))
                for k, v in self._conn.execute(f"SELECT key, result FROM responses WHERE key IN ({marks})", chunk):
                    out[k] = Result.model_validate_json(v)
        return out

    def put_many(self, items: dict[str, Result]) -> None:
        with self._lock:
            self._conn.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?)",
                                   [(k, _stored(r)) for k, r in items.items()])
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _stored(result: Result) -> str:
    return result.model_dump_json(exclude={"prompt_text"})


class CachedEngine:
    """Wraps any engine; counts hits and misses."""

    def __init__(self, engine, cache: RequestCache):
        self.engine, self.cache = engine, cache
        self.config = engine.config
        self.hits = self.misses = 0
        self._identity = None

    def start(self) -> None:
        self.engine.start()

    def identity(self) -> dict:
        if self._identity is None:
            self._identity = self.engine.identity()
        return self._identity

    def count_tokens(self, request: Request) -> int:
        return self.engine.count_tokens(request)

    def run_facts(self) -> dict:
        return run_facts(self.engine)

    def generate(self, requests: list[Request]) -> list[Result]:
        keys = {i: cache_key(self.identity(), r) for i, r in enumerate(requests) if cacheable(r)}
        found = self.cache.get_many(sorted(set(keys.values())))  # one round trip per batch
        out: list[Result | None] = [None] * len(requests)
        todo = []
        for i, req in enumerate(requests):
            hit = found.get(keys[i]) if i in keys else None
            if hit is not None:
                self.hits += 1
                out[i] = _from_cache(hit, req)
            else:
                todo.append(i)
        # identical cacheable requests in one batch are computed once
        first: dict[str, int] = {}
        unique = []
        for i in todo:
            k = keys.get(i)
            if k is not None and k in first:
                continue
            if k is not None:
                first[k] = i
            unique.append(i)
        if unique:
            self.misses += len(unique)
            fresh = self.engine.generate([requests[i] for i in unique])
            for i, res in zip(unique, fresh):
                out[i] = res
            self.cache.put_many({keys[i]: out[i] for i in unique if i in keys and out[i].ok})
        for i in todo:
            if out[i] is None:
                self.hits += 1
                out[i] = _from_cache(out[first[keys[i]]], requests[i])
        return out  # type: ignore[return-value]

    def check_health(self) -> bool:
        return self.engine.check_health()

    def close(self) -> None:
        self.engine.close()


def _from_cache(hit: Result, req: Request) -> Result:
    return hit.model_copy(update={"from_cache": True, "request_id": req.request_id,
                                  "cached_prompt_tokens": hit.prompt_tokens})
