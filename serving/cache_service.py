"""One request cache for a whole run, shared by engine actors on every node.

A ``RequestCacheService`` actor, owned by the driver (named after the run, not detached: it
ends with the driver), is pinned to the driver's node and holds the sqlite file there, on the
disk the driver owns. Engine actors anywhere in the cluster talk to it through
``RemoteRequestCache`` with one batched lookup and one batched insert per engine call, so the
file has exactly one writer (sqlite over a network filesystem is not safe; this never needs
one). Ray restarts the actor if it dies (``max_restarts=-1``); the file persists, so a restarted
service, or the next run, still answers earlier requests.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from llmrec.errors import DataError, wrapped_llmrec_error
from llmrec.serving.cache import NOT_STORED, RequestCache, Work
from llmrec.types import Result


class CacheError(DataError):
    """The request cache file cannot be read or written (a full disk, sqlite's ``disk I/O error``, a read-only
    folder): one line naming the file, raised through Ray to the driver as is."""


@contextlib.contextmanager
def cache_errors(path: str, doing: str):
    try:
        yield
    except (sqlite3.Error, OSError) as e:
        raise CacheError(f"request cache {path}: cannot {doing}: {e} (free space or fix the folder and re-run, "
                         "finished samples are kept; or run with --no-cache)") from None

log = logging.getLogger(__name__)


class RequestCacheService:
    """Actor body: batch get/put over one sqlite cache file."""

    def __init__(self, path: str):
        self.path = path
        with cache_errors(path, "open it"):
            self.cache = RequestCache(path)

    def get_many(self, keys: list[str]) -> dict[str, str]:
        with cache_errors(self.path, "read"):
            return {k: r.model_dump_json() for k, r in self.cache.get_many(keys).items()}

    def put_many(self, items: dict[str, str], by: "str | Work | None" = None) -> int:
        with cache_errors(self.path, "write"):
            self.cache.put_many({k: Result.model_validate_json(v) for k, v in items.items()}, by)
        return len(items)

    def claim(self, keys: list[str], work: Work) -> set[str]:
        with cache_errors(self.path, "write"):
            return self.cache.claim(keys, work)

    def size(self) -> int:
        with cache_errors(self.path, "read"):
            return len(self.cache)


class RemoteRequestCache:
    """The ``RequestCache`` batch API, answered by the run's cache service actor."""

    def __init__(self, handle):
        self.handle = handle

    def get_many(self, keys: list[str]) -> dict[str, Result]:
        if not keys:
            return {}
        found = ray.get(self.handle.get_many.remote(keys))
        return {k: Result.model_validate_json(v) for k, v in found.items()}

    def put_many(self, items: dict[str, Result], by: "str | Work | None" = None) -> None:
        if items:
            # the rendered prompt is not cached: it does not cross to the service either
            ray.get(self.handle.put_many.remote({k: r.model_dump_json(exclude=NOT_STORED) for k, r in items.items()},
                                                by))

    def claim(self, keys: list[str], work: Work) -> set[str]:
        return ray.get(self.handle.claim.remote(keys, work)) if keys else set()

    def __len__(self) -> int:
        return ray.get(self.handle.size.remote())


def start_cache_service(path: str, name: str):
    """Start the service on this (the driver's) node; returns its actor handle."""
    with cache_errors(path, "open it"):  # here first: the actor runs on this node, and Ray does not hand back
        RequestCache(path).close()  # the exception of a failed actor constructor, only its text
    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(RequestCacheService)
    handle = actor.options(name=name, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(path)
    try:
        ray.get(handle.size.remote())  # fail here, naming the file, if it cannot be opened
    except ray.exceptions.RayError as e:
        inner = wrapped_llmrec_error(e)
        if inner is not None:
            raise CacheError(str(inner)) from e
        said = str(e).rsplit(f"{CacheError.__name__}: ", 1)  # an ActorDiedError keeps only the text of the cause
        if len(said) == 2:
            raise CacheError(said[1].splitlines()[0]) from e
        raise
    log.info("request cache service %s: %s on node %s", name, path, node[:12])
    return handle


def stop_cache_service(handle) -> None:
    ray.kill(handle, no_restart=True)
