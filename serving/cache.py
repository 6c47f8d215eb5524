"""Request cache: a repeated request is answered from disk.

Key = sha256 of (engine identity, messages, sampling params, constraint). Requests that
sample (temperature > 0) without a fixed seed are not cached. Failed results are never
stored, nor a result's rendered ``prompt_text`` (a long conversation's prompt in every row; a hit's request
reference still names its messages, see ``llmrec.transcripts``). The cache speaks a batch API (``get_many`` / ``put_many``); in a run, one service
actor on the driver's node owns the sqlite file and every engine actor, on any node, uses it
through ``cache_service.RemoteRequestCache``. A local ``RequestCache`` (WAL mode) serves
single-process use.

A cached answer is reused only where the engine asking could have produced it: the key's engine identity holds
every engine setting that can change an answer or whether a request fails (``serving.engine.config_identity``), and
a hit whose prompt would not fit the asking engine's context (the hit's prompt tokens + ``max_tokens`` over
``context_limit``) is not taken: the request goes to the engine, which answers ``over_context`` as it would
without the cache. Each entry records the run that wrote it (``run``, the run directory); a hit written for
another run is marked on its result (``computed_for``), so a run can say how many answers it did not compute.

Work not yet in a stored record. A run's engine actors tell the cache whose work a fresh answer is (``Work``: the
run, the invocation, the role); it stays in the run's *unsettled* work until the driver has stored the record that
holds it (``settle``). A batch that was running when its run stopped (a budget, a crash) never reaches the store, so
its answers stay unsettled: the run's cost ledger counts them (``unsettled``), and when a later invocation of the
same run asks the same request, the answer is handed over as that run's own engine call (``claim``), not as a free
cache hit, so the work is counted once, as in a run made in one go.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from llmrec.serving.engine import engine_provenance, run_facts
from llmrec.types import Request, Result


def cache_key(identity: dict, request: Request) -> str:
    blob = json.dumps({"engine": identity, "request": request.cache_payload()}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def cacheable(request: Request) -> bool:
    return request.sampling.temperature == 0 or request.sampling.seed is not None


@dataclass(frozen=True)
class Work:
    """Whose engine calls an engine actor makes: a run (its directory's URI), one invocation of it, a role."""

    run: str
    invocation: str
    role: str


UNRECORDED = "(not recorded)"  # the writer of an entry stored before the cache recorded its runs
_INSERT = "INSERT OR REPLACE INTO responses (key, result, run) VALUES (?, ?, ?)"


class RequestCache:
    """The sqlite file: ``responses(key, result, run)``; ``run``: the run that wrote the entry (NULL: not said, e.g.
    an entry of a file made before the column existed, which opening such a file adds)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, result TEXT NOT NULL, run TEXT)")
        if "run" not in {row[1] for row in self._conn.execute("PRAGMA table_info(responses)")}:
            try:
                self._conn.execute("ALTER TABLE responses ADD COLUMN run TEXT")
            except sqlite3.OperationalError as e:  # another process added it first
                if "duplicate column" not in str(e):
                    raise
        # a run's engine work whose record is not stored yet (see the module docstring)
        self._conn.execute("CREATE TABLE IF NOT EXISTS unsettled (run TEXT NOT NULL, key TEXT NOT NULL, "
                           "invocation TEXT NOT NULL, role TEXT NOT NULL, PRIMARY KEY (run, key))")
        self._conn.commit()

    def get(self, key: str) -> Result | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, result: Result, by: "str | Work | None" = None) -> None:
        self.put_many({key: result}, by)

    def get_many(self, keys: list[str]) -> dict[str, Result]:
        """The stored answers, each with ``computed_for`` = the run that wrote it (``UNRECORDED``: not said)."""
        out: dict[str, Result] = {}
        with self._lock:
            for i in range(0, len(keys), 500):  # stay under sqlite's bound-parameter limit
                chunk = keys[i: i + 500]
                marks = ",".join("?" * len(chunk))
                for k, v, run in self._conn.execute(
                        f"SELECT key, result, run FROM responses WHERE key IN ({marks})", chunk):
                    out[k] = Result.model_validate_json(v).model_copy(update={"computed_for": run or UNRECORDED})
        return out

    def put_many(self, items: dict[str, Result], by: "str | Work | None" = None) -> None:
        """Store fresh answers, recording the run they were computed for (``by``: the run, or its ``Work``) as their
        writer; with a ``Work``, they are also that run's unsettled work until ``settle``."""
        run = by.run if isinstance(by, Work) else by
        with self._lock:
            self._conn.executemany(_INSERT, [(k, _stored(r), run) for k, r in items.items()])
            if isinstance(by, Work):
                self._conn.executemany("INSERT OR REPLACE INTO unsettled VALUES (?, ?, ?, ?)",
                                       [(by.run, k, by.invocation, by.role) for k in items])
            self._conn.commit()

    def claim(self, keys: list[str], work: Work) -> set[str]:
        """Of ``keys``, those that are ``work.run``'s unsettled work from another invocation (a batch that never
        reached the store): they become this invocation's, once (a second claim in the same invocation gets none)."""
        out: set[str] = set()
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i: i + 500]
                marks = ",".join("?" * len(chunk))
                out.update(k for (k,) in self._conn.execute(
                    f"SELECT key FROM unsettled WHERE run=? AND invocation<>? AND key IN ({marks})",
                    [work.run, work.invocation, *chunk]))
            self._conn.executemany("UPDATE unsettled SET invocation=? WHERE run=? AND key=?",
                                   [(work.invocation, work.run, k) for k in out])
            self._conn.commit()
        return out

    def settle(self, run: str, keys: list[str]) -> None:
        """The records holding these answers of ``run`` are stored: they are no longer unsettled."""
        with self._lock:
            self._conn.executemany("DELETE FROM unsettled WHERE run=? AND key=?", [(run, k) for k in keys])
            self._conn.commit()

    def unsettled(self, run: str) -> list[tuple[str, Result]]:
        """(role, answer) of each engine call of ``run`` that no stored record holds."""
        with self._lock:
            rows = self._conn.execute("SELECT u.role, r.result FROM unsettled u JOIN responses r ON r.key = u.key "
                                      "WHERE u.run=? ORDER BY u.key", (run,)).fetchall()
        return [(role, Result.model_validate_json(v)) for role, v in rows]

    def drop_unsettled(self, run: str) -> None:
        """Forget ``run``'s unsettled work (a fresh start: its ledger starts afresh with its results)."""
        with self._lock:
            self._conn.execute("DELETE FROM unsettled WHERE run=?", (run,))
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


NOT_STORED = {"prompt_text", "computed_for"}  # a result's fields the cache does not keep (its writer is a column)


def _stored(result: Result) -> str:
    return result.model_dump_json(exclude=NOT_STORED)


_UNKNOWN = object()


class CachedEngine:
    """Wraps any engine; counts hits and misses. ``by``: the run asking (its directory), or its ``Work`` (the run,
    this invocation, the role), recorded as the writer of the entries it stores; a hit written by another run
    carries that run in ``computed_for``. With a ``Work``, fresh answers are that run's unsettled work, and an
    answer the same run's earlier invocation computed but never stored is handed over as an engine call
    (``from_cache`` False, its own tokens and latency) rather than a cache hit; ``take_worked`` gives the keys of
    both since it was last called (the driver settles them once stored)."""

    def __init__(self, engine, cache: RequestCache, by: "str | Work | None" = None):
        self.engine, self.cache = engine, cache
        self.work = by if isinstance(by, Work) else None
        self.run = by.run if isinstance(by, Work) else by
        self.config = engine.config
        self.hits = self.misses = 0
        self._identity = None
        self._limit = _UNKNOWN
        self._worked: set[str] = set()

    def take_worked(self) -> list[str]:
        out, self._worked = sorted(self._worked), set()
        return out

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

    def provenance(self) -> dict:
        return engine_provenance(self.engine)

    @property
    def context_limit(self) -> int | None:
        """The wrapped engine's context (prompt + completion tokens), None where it reports none (a remote server)."""
        if self._limit is _UNKNOWN:
            start = getattr(self.engine, "start", None)
            if callable(start):
                start()  # idempotent; an engine may learn its limit when it starts (a served model's length)
            try:
                self._limit = getattr(self.engine, "context_limit", None)
            except AttributeError:  # a property that found no limit
                self._limit = None
        return self._limit

    def _fits(self, hit: Result, req: Request) -> bool:
        """Whether the hit's prompt fits this engine's context with the request's ``max_tokens`` (unknown: yes)."""
        limit = self.context_limit
        return limit is None or hit.prompt_tokens + req.sampling.max_tokens <= limit

    def generate(self, requests: list[Request]) -> list[Result]:
        keys = {i: cache_key(self.identity(), r) for i, r in enumerate(requests) if cacheable(r)}
        found = self.cache.get_many(sorted(set(keys.values())))  # one round trip per batch
        mine = self.cache.claim(sorted(found), self.work) if self.work is not None and found else set()
        self._worked.update(mine)
        out: list[Result | None] = [None] * len(requests)
        todo = []
        for i, req in enumerate(requests):
            hit = found.get(keys[i]) if i in keys else None
            if hit is not None and keys[i] in mine:  # this run's own unstored work: its engine call, counted once
                mine.discard(keys[i])
                self.misses += 1
                out[i] = hit.model_copy(update={"request_id": req.request_id, "computed_for": None})
            elif hit is not None and self._fits(hit, req):
                self.hits += 1
                out[i] = self._from_cache(hit, req)
            else:  # a miss, or an answer this engine could not have given: the engine decides (over_context)
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
            fresh_ok = {keys[i]: out[i] for i in unique if i in keys and out[i].ok}
            if fresh_ok:
                self.cache.put_many(fresh_ok, self.work if self.work is not None else self.run)
                if self.work is not None:
                    self._worked.update(fresh_ok)
        for i in todo:
            if out[i] is None:  # the same request as an earlier one of this batch: this run's own call
                self.hits += 1
                out[i] = _from_cache(out[first[keys[i]]], requests[i], None)
        return out  # type: ignore[return-value]

    def _from_cache(self, hit: Result, req: Request) -> Result:
        writer = hit.computed_for
        if self.run is None:  # a caller outside a run: only a writer the entry names is another run
            return _from_cache(hit, req, None if writer == UNRECORDED else writer)
        return _from_cache(hit, req, None if writer == self.run else writer)

    def check_health(self) -> bool:
        return self.engine.check_health()

    def close(self) -> None:
        self.engine.close()


def _from_cache(hit: Result, req: Request, computed_for: str | None) -> Result:
    return hit.model_copy(update={"from_cache": True, "request_id": req.request_id,
                                  "cached_prompt_tokens": hit.prompt_tokens, "computed_for": computed_for})
