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

import logging

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from llmrec.serving.cache import RequestCache
from llmrec.types import Result

log = logging.getLogger(__name__)


class RequestCacheService:
    """Actor body: batch get/put over one sqlite cache file."""

    def __init__(self, path: str):
        self.cache = RequestCache(path)

    def get_many(self, keys: list[str]) -> dict[str, str]:
        return {k: r.model_dump_json() for k, r in self.cache.get_many(keys).items()}

    def put_many(self, items: dict[str, str]) -> int:
        self.cache.put_many({k: Result.model_validate_json(v) for k, v in items.items()})
        return len(items)

    def size(self) -> int:
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

    def put_many(self, items: dict[str, Result]) -> None:
        if items:
            # the rendered prompt is not cached: it does not cross to the service either
            ray.get(self.handle.put_many.remote({k: r.model_dump_json(exclude={"prompt_text"})
                                                 for k, r in items.items()}))

    def __len__(self) -> int:
        return ray.get(self.handle.size.remote())


def start_cache_service(path: str, name: str):
    """Start the service on this (the driver's) node; returns its actor handle."""
    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(RequestCacheService)
    handle = actor.options(name=name, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(path)
    ray.get(handle.size.remote())  # fail here, naming the file, if it cannot be opened
    log.info("request cache service %s: %s on node %s", name, path, node[:12])
    return handle


def stop_cache_service(handle) -> None:
    ray.kill(handle, no_restart=True)
