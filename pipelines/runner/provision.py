"""Where a run's engines live: one strategy per role, chosen from the config in one place (``provision_for``).

A strategy is driver-side and small: ``start()`` provisions the engine (nothing, engine actors, or a Serve app),
``client()`` returns what travels to every Ray Data map actor (a picklable opener: called there, it returns the
engine the actor's stages talk to) and ``stop()`` removes what ``start`` made. ``holds_engine`` says whether the map
actors hold the engine themselves (then they reserve its CPUs/GPUs, see ``placement.actor_resources``).

- :class:`InActor`: each map actor builds and starts its own engine (``execution.mode: actors``, no pool).
- :class:`EnginePool`: the role's own engine actors (``serving.engine_pool``): the judge's pool
  (``execution.judge_replicas``) and a suite's shared subject.
- :class:`ServeApp`: a Ray Serve deployment (``execution.mode: serve``): llmrec's ``EngineDeployment``, or the
  engine's own serving stack (its ``deploy_serve`` / ``serve_client`` hooks, e.g. a ``ray.serve.llm`` app).
- :class:`Borrowed`: a strategy owned by someone else (a suite's :class:`SharedSubject`): started on first use,
  never stopped by a run.

Configs are the validated ``EngineConfig`` objects (pickled to the actors, never re-validated there).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Protocol

from llmrec.serving.engine import ENGINES, Engine, EngineConfig, build_engine

log = logging.getLogger(__name__)

Opener = Callable[[], Engine]  # what a map actor calls (once per role) to get its engine


class Provision(Protocol):
    holds_engine: bool

    def start(self) -> None: ...

    def client(self) -> Opener: ...

    def stop(self) -> None: ...


def app_name(run: str, role: str) -> str:
    """Serve app of one run and role: concurrent runs never share (or delete) each other's apps."""
    return f"llmrec-{run}-{role}"


def _started(cfg: EngineConfig, role: str, kv_budget: int | None) -> Engine:
    """Inside a map actor: the engine, built and started (one that holds fewer KV tokens than the ``kv_budget``
    the rows were packed to is logged: its batches may be preempted)."""
    from llmrec.pipelines.runner.prompt_sizes import over_capacity

    engine = build_engine(cfg)
    engine.start()
    warning = over_capacity(kv_budget, engine.kv_capacity())
    if warning:
        log.warning("%s engine: %s", role, warning)
    return engine


def _given(engine: Engine) -> Engine:
    return engine


@dataclass
class InActor:
    """Every map actor builds and starts its own engine."""

    cfg: EngineConfig
    role: str
    kv_budget: int | None = None
    holds_engine = True

    def start(self) -> None:
        pass

    def client(self) -> Opener:
        return partial(_started, self.cfg, self.role, self.kv_budget)

    def stop(self) -> None:
        pass


@dataclass
class EnginePool:
    """The role's own engine actors; the map actors get a client (``PoolEngine``) of them."""

    cfg: EngineConfig
    replicas: int
    name: str
    resources: dict = field(default_factory=dict)  # start_engine_pool's num_cpus, num_gpus, bundles, max_restarts
    holds_engine = False
    pool: object = None  # serving.engine_pool.EnginePool, once started

    def start(self) -> None:
        from llmrec.serving.engine_pool import start_engine_pool

        if self.pool is None:
            self.pool = start_engine_pool(self.cfg, self.replicas, self.name, **self.resources)

    def client(self) -> Opener:
        return partial(_given, self.pool.client())

    def stop(self) -> None:
        from llmrec.serving.engine_pool import stop_engine_pool

        if self.pool is not None:
            stop_engine_pool(self.pool)
        self.pool = None


def _serve_client(cfg: EngineConfig, app: str, timeout_s: float | None) -> Engine:
    from llmrec.serving.serve_app import ServeEngine

    own = ENGINES.get(cfg.type).engine_cls.serve_client  # an engine's own serving stack, if it has one
    return own(cfg) if own else ServeEngine(app, cfg, timeout_s=timeout_s)


@dataclass
class ServeApp:
    """A Serve deployment of the engine, named after the run and role. An app of the same name already running
    was left by an earlier driver of this run that died: it is deleted first."""

    cfg: EngineConfig
    app: str
    replicas: int
    num_cpus: float
    num_gpus: float
    timeout_s: float | None = None
    holds_engine = False
    served: EngineConfig | None = None  # once deployed: the config its clients use (an own app may add base_url)
    tried: bool = False  # a deployment was started (stop deletes the app even if it never came up)

    def start(self) -> None:
        from llmrec.serving.serve_app import deploy, remove_apps

        if self.served is not None:
            return
        self.tried = True
        remove_apps([self.app], reason="left by an earlier driver of this run")
        own = ENGINES.get(self.cfg.type).engine_cls.deploy_serve
        if own is not None:
            self.served = own(self.cfg, self.app, self.replicas, self.num_cpus, self.num_gpus)
        else:
            deploy(self.cfg, app_name=self.app, replicas=self.replicas, num_cpus=self.num_cpus,
                   num_gpus=self.num_gpus, http=False)
            self.served = self.cfg

    def client(self) -> Opener:
        return partial(_serve_client, self.served, self.app, self.timeout_s)

    def stop(self) -> None:
        from llmrec.serving.serve_app import shutdown

        if not self.tried:
            return
        self.served, self.tried = None, False
        try:
            shutdown(self.app)
        except Exception as e:  # noqa: BLE001 - shutting down must not hide the run's own error
            log.warning("could not shut down Serve app %s: %s", self.app, e)


def provision_for(cfg: EngineConfig, role: str, ex, name: str, *, shared: bool = False,
                  kv_budget: int | None = None) -> Provision:
    """The one place that decides where a role's engine runs. ``name``: the run's (or a suite subject's) name;
    ``shared``: the engine serves several runs (a suite's subject: an engine pool in actors mode)."""
    from llmrec.pipelines.runner.placement import judge_pool_resources, judge_pooled, subject_pool_resources
    from llmrec.serving.engine_pool import runs_in_process

    if ex.mode == "serve":
        return ServeApp(cfg, app_name(name, role), ex.concurrency, ex.num_cpus_per_worker, ex.num_gpus_per_worker,
                        ex.request_timeout_s)
    if shared and runs_in_process(cfg):
        return EnginePool(cfg, ex.concurrency, app_name(name, role), subject_pool_resources(cfg, ex))
    if role == "judge" and judge_pooled(cfg, ex):
        return EnginePool(cfg, ex.judge_replicas, app_name(name, role), judge_pool_resources(cfg, ex))
    return InActor(cfg, role, kv_budget)  # also a client of a server elsewhere (remote, e.g. openai): nothing to place


@dataclass
class Borrowed:
    """A strategy that outlives the run (a suite's shared subject): started on the run's first use, stopped by its
    owner."""

    shared: "SharedSubject"

    @property
    def holds_engine(self) -> bool:
        return self.shared.provision.holds_engine

    def start(self) -> None:
        self.shared.acquire()

    def client(self) -> Opener:
        return self.shared.provision.client()

    def stop(self) -> None:
        pass


class SharedSubject:
    """A subject engine started once and used by several runs (the benchmarks of a suite): in actors mode a pool
    of engine actors whose client every run's map actors get; in serve mode one Serve app, kept across the runs;
    a remote engine (openai) needs nothing started. It starts on the first run that has samples to send (a suite
    whose runs are all finished starts no engine) and stops with :meth:`stop` after the subject's last run."""

    def __init__(self, engine: EngineConfig, ex, ray_cfg, name: str):
        self.engine, self.ex, self.ray_cfg, self.name = engine, ex, ray_cfg, name
        self.provision = provision_for(engine, "subject", ex, name, shared=True)
        self.start_s: float | None = None  # seconds the engine took to start (None: never started)

    @property
    def app(self) -> str:
        return app_name(self.name, "subject")

    def acquire(self) -> None:
        """Start the engine unless it runs already."""
        from llmrec.pipelines.runner.ray_env import ensure_ray

        if self.start_s is not None:
            return
        ensure_ray(self.ray_cfg)
        t0 = time.perf_counter()
        self.provision.start()
        self.start_s = time.perf_counter() - t0
        log.info("subject %s: engine started once in %.1fs, shared by the suite's runs", self.name, self.start_s)

    def stop(self) -> None:
        self.provision.stop()


class RunEngines:
    """A run's engines, one strategy per role (``subject``, ``judge``), on the driver: ``start`` them (the
    placement checks first), hand their ``clients`` to the map actors, ``stop`` the ones this run started."""

    def __init__(self, cfg, run: str, subject: SharedSubject | None = None):
        ex = cfg.execution
        kv = ex.kv_budget_tokens if ex.order_by_prefix else None
        jurors = cfg.judging.jurors if cfg.judge is not None and cfg.judging is not None else []
        judges = {"judge": cfg.judge} if cfg.judge is not None else {}
        judges.update({f"judge{i}": j for i, j in enumerate(jurors, 2)})  # a jury's other judges
        self.cfg, self.roles = cfg, {}
        self.configs = {**({} if cfg.rejudge is not None else {"subject": cfg.engine}), **judges}
        if cfg.rejudge is None:  # `llmrec rejudge` runs judge stages only: no subject engine
            self.roles["subject"] = (Borrowed(subject) if subject is not None
                                     else provision_for(cfg.engine, "subject", ex, run, kv_budget=kv))
        for role, judge in judges.items():
            self.roles[role] = provision_for(judge, role, ex, run)

    @property
    def thin(self) -> bool:
        """The map actors hold no engine (every role runs elsewhere: reserve no engine resources for them)."""
        return not any(p.holds_engine for p in self.roles.values())

    def start(self) -> None:
        import ray

        from llmrec.pipelines.runner.placement import check_gpu_placement, shortfalls

        check_gpu_placement(self.configs, self.cfg.execution)
        if isinstance(self.roles.get("judge"), EnginePool):
            for line in shortfalls(self.cfg.engine, self.cfg.judge, self.cfg.execution, ray.cluster_resources()):
                log.warning("%s", line)
        for p in self.roles.values():
            p.start()  # on a failure the caller's stop() removes what was started

    def clients(self) -> dict[str, Opener]:
        return {role: p.client() for role, p in self.roles.items()}

    def stop(self) -> None:
        for p in self.roles.values():
            p.stop()
