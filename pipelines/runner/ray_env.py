"""Ray start-up for a run, through ``llmrec.ray_start`` (the one module calling ``ray.init``). Where the engines
run (in the map actors, engine-actor pools, Serve apps) is ``provision.py``'s."""

from __future__ import annotations

import logging

from llmrec.pipelines.runner.run_config import RayConfig
from llmrec.pipelines.runner.provision import SharedSubject  # noqa: F401 - where suites found it
from llmrec.ray_start import start_ray

log = logging.getLogger(__name__)


def ensure_ray(cfg: RayConfig) -> None:
    """Start or join Ray as a run's ``ray:`` section says (workers' output stays off the progress bar; a local
    instance runs no log monitor, and Ray's metrics only with ``ray.metrics``)."""
    start_ray(cfg.address, cfg.num_cpus, cfg.worker_niceness, worker_logs=False, metrics=cfg.metrics)
