"""A pool of engine actors, and the client that makes the pool look like one engine.

Why: in ``execution.mode: actors`` a Ray Data actor that held both the subject and the judge
engine left one of them idle while the other worked (and made them share a GPU). A role can
instead get its own pool: ``EngineActor`` hosts ``build_engine(cfg)`` in its own process with
its own resources, and every caller talks to the pool through ``PoolEngine``, which implements
the Engine protocol, so the request cache, retries and token accounting wrap it as they wrap
a local engine.

- ``PoolEngine.generate`` spreads the requests of one call over the actors: requests sharing a
  ``prefix_key`` stay together (one actor's prefix cache serves them), the groups go to the
  least-loaded actor, biggest first, and the results come back in request order, one per
  request, as the engine returned them.
- Faults: an engine that raises ``EngineDead`` ends its actor's process; Ray restarts the actor
  (``max_restarts``) and runs its in-flight calls again (``max_task_retries=-1``). When an actor
  dies for good (or cannot be reached), its requests come back as failures (``finish_reason="error"``)
  while the other actors' answers are kept, and a dead actor gets no more requests from this client.
  The pool re-sends nothing itself: ``resilience.generate_resilient`` retries the failed requests
  under the one retry policy (``serving/retry.py``), and they go to the live actors.
- The driver owns the pool (``start_engine_pool`` / ``stop_engine_pool``); clients never close it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field

from llmrec.errors import ContextOverflow, EngineDead, EngineError
from llmrec.serving.engine import ENGINES, EngineConfig, build_engine, engine_config
from llmrec.types import Request, Result

log = logging.getLogger(__name__)

THREADED_CALLS = 32  # concurrent calls an actor accepts when its engine is thread-safe


def runs_in_process(cfg: EngineConfig) -> bool:
    """False for engines that are clients of a server elsewhere (``remote = True``, e.g. openai):
    such an engine has nothing to place, so a pool of them would only add a hop."""
    return not ENGINES.get(cfg.type).engine_cls.remote


class EngineActor:
    """Actor body: one engine, built and started in this process. Engine errors come back as
    data (``{"error": ...}``) so the client re-raises them as the engine's own exceptions."""

    def __init__(self, cfg: EngineConfig):
        self._engine = build_engine(cfg)
        self._engine.start()

    def _run(self, fn, *args) -> dict:
        try:
            return {"ok": fn(*args)}
        except EngineDead as e:
            # as in StageWorker: ending the process lets Ray restart the actor and re-run the call
            log.error("engine dead, restarting this engine actor: %s", e)
            os._exit(1)
        except ContextOverflow as e:
            return {"error": {"kind": "context_overflow", "args": [e.prompt_tokens, e.context_limit, e.max_tokens]}}
        except Exception as e:  # noqa: BLE001 - a whole-engine failure, re-raised by the client
            return {"error": {"kind": "engine", "message": f"{type(e).__name__}: {e}"}}

    def generate(self, requests: list[Request]) -> dict:
        return self._run(self._engine.generate, requests)

    def count_tokens(self, request: Request) -> dict:
        return self._run(self._engine.count_tokens, request)

    def identity(self) -> dict:
        return self._run(self._engine.identity)

    def context_limit(self) -> dict:
        return {"ok": self._engine.context_limit}

    def check_health(self) -> bool:
        return bool(self._engine.check_health())

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self._engine.close()


def _unwrap(out: dict):
    if "ok" in out:
        return out["ok"]
    err = out["error"]
    if err["kind"] == "context_overflow":
        raise ContextOverflow(*err["args"])
    raise EngineError(err["message"])


def assign(requests: list[Request], loads: list[int], start: int = 0) -> list[list[int]]:
    """Request indices per actor: prefix groups whole, biggest first, each to the actor with the
    least load (in-flight requests plus those assigned here; ties: from ``start`` on)."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(r.prefix_key if r.prefix_key is not None else f"\x00{i}", []).append(i)
    n = len(loads)
    load = list(loads)
    out: list[list[int]] = [[] for _ in range(n)]
    for g in sorted(groups.values(), key=len, reverse=True):
        k = min(range(n), key=lambda a: (load[a], (a - start) % n))
        out[k].extend(g)
        load[k] += len(g)
    return [sorted(ix) for ix in out]


class ActorFault(EngineError):
    """An engine actor died or could not be reached (a fault of the actor, not an error of its engine)."""


class PoolEngine:
    """The Engine protocol, answered by a pool of ``EngineActor``s (picklable: it travels to every
    Ray Data actor; each copy keeps its own load counts and its own list of dead actors)."""

    thread_safe = True

    def __init__(self, actors: list, cfg: EngineConfig):
        if not actors:
            raise EngineError("an engine pool needs at least one actor")
        self.config, self._actors = cfg, list(actors)
        self._loads = [0] * len(actors)
        self._dead: set[int] = set()  # actors this client saw die for good
        self._lock = threading.Lock()
        self._turn = 0
        self._identity: dict | None = None
        self._limit: int | None = None

    def __reduce__(self):
        return PoolEngine, (self._actors, self.config)

    def start(self) -> None:
        pass  # the driver started the actors

    def _live(self) -> list[int]:
        live = [a for a in range(len(self._actors)) if a not in self._dead]
        if not live:
            raise EngineError(f"engine pool ({self.config.type}): all {len(self._actors)} engine actor(s) died")
        return live

    def _call(self, k: int, method: str, *args):
        """``actor.method(*args)`` on actor ``k``, once. An actor fault raises ``ActorFault``, and an actor
        that died for good gets nothing more from this client."""
        import ray
        from ray.exceptions import ActorDiedError, ObjectLostError, RayActorError

        try:
            return _unwrap(ray.get(getattr(self._actors[k], method).remote(*args)))
        except (RayActorError, ObjectLostError) as e:  # the actor (or its node) died, its restarts used up
            if isinstance(e, ActorDiedError):
                with self._lock:
                    self._dead.add(k)
            log.warning("engine actor %d of %d failed (%s)", k + 1, len(self._actors), type(e).__name__)
            raise ActorFault(f"engine pool ({self.config.type}): actor {k + 1} of {len(self._actors)} failed: "
                             f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from e

    def _call_any(self, method: str, *args):
        """A question any actor answers (token counts, identity): the live actors, least loaded first, until one
        answers (no wait: a fault of one actor says nothing about the next)."""
        with self._lock:
            order = sorted(self._live(), key=self._loads.__getitem__)
        for k in order[:-1]:
            try:
                return self._call(k, method, *args)
            except ActorFault:
                continue
        return self._call(order[-1], method, *args)

    def generate(self, requests: list[Request]) -> list[Result]:
        if not requests:
            return []
        with self._lock:
            live = self._live()
            shares = assign(requests, [self._loads[a] for a in live], self._turn % len(live))
            parts: list[list[int]] = [[] for _ in self._actors]
            for a, ix in zip(live, shares):
                parts[a] = ix
            self._turn = (self._turn + 1) % len(self._actors)
            for k, ix in enumerate(parts):
                self._loads[k] += len(ix)
        busy = [(k, ix) for k, ix in enumerate(parts) if ix]
        out: list[Result | None] = [None] * len(requests)
        try:
            answers = self._fan_out(busy, requests)
        finally:
            with self._lock:
                for k, ix in enumerate(parts):
                    self._loads[k] -= len(ix)
        for (k, ix), res in zip(busy, answers):
            if isinstance(res, ActorFault):  # this actor's requests failed (the caller retries them); others stand
                res = [Result.failure(requests[i], str(res)) for i in ix]
            if len(res) != len(ix):
                raise EngineError(f"engine actor returned {len(res)} results for {len(ix)} requests")
            for i, r in zip(ix, res):
                out[i] = r
        return out  # type: ignore[return-value]

    def _part(self, k: int, ix: list[int], requests: list[Request]):
        """One actor's share: its results, or the ``ActorFault`` when the actor failed (engine errors raise)."""
        try:
            return self._call(k, "generate", requests if len(ix) == len(requests) else [requests[i] for i in ix])
        except ActorFault as e:
            return e

    def _fan_out(self, busy: list[tuple[int, list[int]]], requests: list[Request]) -> list:
        """The parts, in parallel threads when there are several (each blocks in ``ray.get``)."""
        if len(busy) == 1:
            return [self._part(*busy[0], requests)]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(busy)) as pool:
            futs = [pool.submit(self._part, k, ix, requests) for k, ix in busy]
            return [f.result() for f in futs]

    def count_tokens(self, request: Request) -> int:
        return int(self._call_any("count_tokens", request))

    def identity(self) -> dict:
        if self._identity is None:
            self._identity = self._call_any("identity")
        return self._identity

    @property
    def context_limit(self) -> int:
        if self._limit is None:
            self._limit = self._call_any("context_limit")
        if self._limit is None:
            raise AttributeError(f"the {self.config.type} engine reports no context_limit")
        return self._limit

    def check_health(self) -> bool:
        import ray
        from ray.exceptions import RayError

        try:
            return all(ray.get([a.check_health.remote() for a in self._actors]))
        except RayError:
            return False

    def close(self) -> None:
        pass  # the driver stops the pool


@dataclass
class EnginePool:
    """What the driver owns: a role's engine actors and their placement groups."""

    config: EngineConfig
    actors: list
    groups: list = field(default_factory=list)

    def client(self) -> PoolEngine:
        return PoolEngine(self.actors, self.config)


def start_engine_pool(cfg: EngineConfig | dict, replicas: int, name: str, num_cpus: float = 1.0,
                      num_gpus: float = 0.0, bundles: list[dict] | None = None, max_restarts: int = 3) -> EnginePool:
    """Start ``replicas`` engine actors and wait until each engine has loaded (a broken engine
    config fails here, naming its error, not in the middle of the run). A raw mapping is validated here, once: the
    actors and every client get the validated config.

    ``bundles``: one placement group per actor (PACK, capturing child tasks, e.g. vLLM's TP/PP
    workers); the actor itself then holds ``num_cpus`` of the first bundle and no GPU."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cfg = engine_config(cfg)
    cls = ENGINES.get(cfg.type).engine_cls
    calls = THREADED_CALLS if cls.thread_safe else 1
    remote = ray.remote(EngineActor)
    pool, t0 = EnginePool(cfg, []), time.perf_counter()
    try:
        for i in range(replicas):
            opts = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_restarts": max_restarts,
                    "max_task_retries": -1, "max_concurrency": calls}
            if bundles:
                pg = ray.util.placement_group(bundles, strategy="PACK")
                pool.groups.append(pg)
                opts.update(num_gpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_capture_child_tasks=True))
            pool.actors.append(remote.options(**opts).remote(cfg))
        _wait_ready(pool, name)
    except BaseException:
        stop_engine_pool(pool)
        raise
    log.info("engine pool %s: %d %s actor(s) ready in %.1fs", name, replicas, cfg.type, time.perf_counter() - t0)
    return pool


def _wait_ready(pool: EnginePool, name: str) -> None:
    import ray
    from ray.exceptions import RayActorError

    refs = [a.pid.remote() for a in pool.actors]
    waited = 0.0
    while True:
        done, todo = ray.wait(refs, num_returns=len(refs), timeout=60)
        if not todo:
            break
        waited += 60
        log.warning("engine pool %s: %d of %d actor(s) not ready after %.0fs (loading, or waiting for "
                    "resources: %s)", name, len(todo), len(refs), waited, ray.available_resources())
    try:
        ray.get(done)
    except RayActorError as e:
        cause = [line for line in str(e).splitlines() if line.strip()][-1]  # the engine's own error, last
        raise EngineError(f"engine pool {name}: an engine actor could not start: {cause}") from e


def stop_engine_pool(pool: EnginePool, timeout_s: float = 30.0) -> None:
    """Close each engine (vLLM shuts its EngineCore down), then remove the actors and groups."""
    import ray
    from ray.exceptions import RayError

    try:
        if pool.actors:
            ray.wait([a.close.remote() for a in pool.actors], num_returns=len(pool.actors), timeout=timeout_s)
    except RayError as e:  # a dead actor has nothing to close
        log.warning("engine pool: close failed: %s", e)
    for a in pool.actors:
        ray.kill(a, no_restart=True)
    for pg in pool.groups:
        ray.util.remove_placement_group(pg)
