"""Ray start-up (through ``llmrec.ray_start``, the one module calling ``ray.init``), Serve app and
engine pool lifecycle for a run."""

from __future__ import annotations

import logging

from llmrec.pipelines.runner.run_config import ExecutionConfig, RayConfig, RunConfig
from llmrec.ray_start import start_ray

log = logging.getLogger(__name__)


def ensure_ray(cfg: RayConfig) -> None:
    """Start or join Ray as a run's ``ray:`` section says (workers' output stays off the progress bar)."""
    start_ray(cfg.address, cfg.num_cpus, cfg.worker_niceness, worker_logs=False)


def start_serve_apps(engines: dict, ex: ExecutionConfig, run: str) -> dict:
    """Deploy this run's apps, one per role (subject, judge: separate deployments), named after the
    run. Apps of the same names already running were left by an earlier driver of this run that
    died: they are deleted first. An engine class with a ``deploy_serve`` hook (e.g. through
    ``ray.serve.llm``) deploys itself and returns the config its client needs; the others run in
    llmrec's own ``EngineDeployment``."""
    from llmrec.pipelines.runner.execution import app_name
    from llmrec.serving.engine import ENGINES
    from llmrec.serving.serve_app import deploy, remove_apps

    remove_apps([app_name(run, role) for role in engines], reason="left by an earlier driver of this run")
    out = {}
    for role, cfg in engines.items():
        own = ENGINES.get(cfg["type"]).engine_cls.deploy_serve
        if own is not None:
            out[role] = own(cfg, app_name(run, role), ex.concurrency, ex.num_cpus_per_worker, ex.num_gpus_per_worker)
            continue
        deploy(cfg, app_name=app_name(run, role), replicas=ex.concurrency, num_cpus=ex.num_cpus_per_worker,
               num_gpus=ex.num_gpus_per_worker, http=False)
        out[role] = cfg
    return out


def stop_serve_apps(engines: dict, run: str) -> None:
    """Delete only the apps this run created."""
    from llmrec.pipelines.runner.execution import app_name
    from llmrec.serving.serve_app import shutdown

    for role in engines:
        try:
            shutdown(app_name(run, role))
        except Exception as e:  # noqa: BLE001 - shutting down must not hide the run's own error
            log.warning("could not shut down Serve app %s: %s", app_name(run, role), e)


def start_judge_pool(cfg: RunConfig, engines: dict, run: str):
    """The judge's own engine actors (``execution.judge_replicas``, the judge's own CPUs/GPUs),
    or None when the judge runs inside the subject actors (no judge, serve mode, a remote judge
    such as openai, or judge_replicas 0). Returns once every judge engine has loaded; the run
    stops it with ``serving.engine_pool.stop_engine_pool``."""
    import ray

    from llmrec.pipelines.runner.placement import judge_pool_resources, judge_pooled, shortfalls
    from llmrec.serving.engine_pool import start_engine_pool

    ex = cfg.execution
    if not judge_pooled(cfg.judge, ex):
        return None
    for line in shortfalls(cfg.engine, cfg.judge, ex, ray.cluster_resources()):
        log.warning("%s", line)
    return start_engine_pool(engines["judge"], ex.judge_replicas, f"llmrec-{run}-judge",
                             **judge_pool_resources(cfg.judge, ex))


class SharedSubject:
    """A subject engine started once and used by several runs (the benchmarks of a suite): in
    actors mode a pool of engine actors (``serving.engine_pool``) whose client every run's
    StageWorkers get as their subject engine; in serve mode one Serve app, kept across the runs.
    It starts on the first run that has samples to send (a suite whose runs are all finished
    starts no engine) and stops with :meth:`stop` after the subject's last run."""

    def __init__(self, engine: dict, ex: ExecutionConfig, ray_cfg: RayConfig, name: str):
        self.engine, self.ex, self.ray_cfg, self.name = engine, ex, ray_cfg, name
        self.pool = None  # actors mode, once started
        self.served: dict | None = None  # serve mode, once deployed: the config its clients use
        self.start_s: float | None = None  # seconds the engine took to start (None: never started)

    @property
    def app(self) -> str:
        from llmrec.pipelines.runner.execution import app_name

        return app_name(self.name, "subject")

    def acquire(self) -> None:
        """Start the engine unless it runs already."""
        import time

        if self.start_s is not None:
            return
        from llmrec.pipelines.runner.placement import subject_pool_resources
        from llmrec.serving.engine import engine_config
        from llmrec.serving.engine_pool import runs_in_process, start_engine_pool

        ensure_ray(self.ray_cfg)
        t0 = time.perf_counter()
        if self.ex.mode == "actors" and not runs_in_process(self.engine):
            pass  # a client of a server elsewhere (e.g. openai): nothing to start, each run's actors connect
        elif self.ex.mode == "serve":
            self.served = start_serve_apps({"subject": self.engine}, self.ex, self.name)["subject"]
        else:
            self.pool = start_engine_pool(self.engine, self.ex.concurrency, self.app,
                                          **subject_pool_resources(engine_config(self.engine), self.ex))
        self.start_s = time.perf_counter() - t0
        log.info("subject %s: engine started once in %.1fs, shared by the suite's runs", self.name, self.start_s)

    def stop(self) -> None:
        from llmrec.serving.engine_pool import stop_engine_pool

        if self.pool is not None:
            stop_engine_pool(self.pool)
        if self.served is not None:
            stop_serve_apps({"subject": self.engine}, self.name)
        self.pool = self.served = None
