"""The one place a process starts or joins Ray: ``llmrec run`` / ``serve`` / ``serve-cleanup`` (through
the runner's ``RayConfig``), ``llmrec train`` / ``tune`` and ``llmrec sft``.

Below every layer that drives Ray (the runner, tuning, SFT), so each of them may import it; Ray itself
is imported only when called.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger(__name__)


def start_ray(address: str | None = None, num_cpus: int | None = None, worker_niceness: int | None = None,
              worker_logs: bool = True) -> bool:
    """Join the Ray cluster at ``address`` ('auto': the running one), or start a local instance
    (``num_cpus``; ``worker_niceness``: None keeps Ray's own default); nothing when this process
    already runs Ray. ``worker_logs``: False keeps workers' output off the driver's console and Ray's
    own logging at WARNING (a run's progress bar); True leaves llmrec's logging configuration alone.
    Returns True when this call started or joined Ray (the caller then owns ``ray.shutdown``)."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict = {"address": address or None, "ignore_reinit_error": True}
    if worker_logs:
        kwargs["configure_logging"] = False
    else:
        kwargs.update(log_to_driver=False, logging_level=logging.WARNING)
    if not address:  # a local instance: this process starts its raylet, so these apply
        kwargs["include_dashboard"] = False
        if num_cpus:
            kwargs["num_cpus"] = num_cpus
        if worker_niceness is not None:
            kwargs["_system_config"] = {"worker_niceness": worker_niceness}
    ray.init(**kwargs)
    log.info("Ray ready: %s", ray.cluster_resources())
    return True


@contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[None]:
    """``start_ray`` for the body of a ``with`` block; Ray is shut down after it when this call
    started or joined it (a process already running Ray keeps it)."""
    started = start_ray(address, num_cpus)
    try:
        yield
    finally:
        if started:
            import ray

            ray.shutdown()
