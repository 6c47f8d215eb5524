"""Where engine actors go: Ray resources per actor, TP×PP placement groups, GPU-sharing checks.

Engines that span several GPUs expose ``gpus_per_replica`` on their config (vllm: tensor ×
pipeline parallel size). As in ``ray.data.llm``'s vLLM stage, a multi-GPU replica gets a
placement group of one ``{GPU: 1, CPU: 1}`` bundle per GPU (PACK: on one node when it fits)
that captures child tasks, and the actor itself reserves no GPU: vLLM's Ray executor places
its TP/PP workers in that group. Dead actors are restarted by Ray (``max_restarts``) and
their batch re-run (``max_task_retries``); see ``StageWorker`` for how an engine death ends
the actor.
"""

from __future__ import annotations

from functools import partial

from llmrec.errors import ConfigError


def gpus_needed(engine_cfg) -> int | None:
    """GPUs one replica of this engine needs, when the engine says (None: any count works)."""
    return getattr(engine_cfg, "gpus_per_replica", None)


def placement_errors(engine, judge, ex) -> list[str]:
    """Static checks of a run's GPU placement (no cluster needed); empty when consistent."""
    errors: list[str] = []
    if ex.mode != "actors" or ex.num_gpus_per_worker == 0:
        return errors
    for role, cfg in (("engine", engine), ("judge", judge)):
        need = gpus_needed(cfg) if cfg is not None else None
        if need is not None and ex.num_gpus_per_worker != need:
            errors.append(f"execution.num_gpus_per_worker is {ex.num_gpus_per_worker:g} but {role} needs "
                          f"tensor_parallel_size x pipeline_parallel_size = {need} GPU(s) per replica; set them equal")
    shares = [getattr(c, "gpu_memory_utilization", None) for c in (engine, judge) if c is not None]
    if len(shares) == 2 and None not in shares and sum(shares) > 0.95:
        errors.append(f"in mode 'actors' the judge shares the subject's GPU(s) (one actor holds both), but "
                      f"engine.gpu_memory_utilization ({shares[0]}) + judge.gpu_memory_utilization ({shares[1]}) "
                      f"> 0.95: vLLM would run out of memory. Use execution.mode: serve (separate deployments), "
                      f"an openai judge on its own GPUs, or lower both so that they sum to at most 0.95")
    return errors


def check_gpu_placement(engines: dict, ex) -> None:
    """Runtime check: a multi-GPU-capable engine on a GPU cluster with no GPU reserved is refused."""
    import ray

    from llmrec.serving.engine import engine_config

    if ex.mode != "actors" or ex.num_gpus_per_worker > 0:
        return
    gpus = ray.cluster_resources().get("GPU", 0)
    for role, cfg in engines.items():
        if gpus and gpus_needed(engine_config(cfg)) is not None:
            raise ConfigError(f"the cluster has {gpus:g} GPU(s) but execution.num_gpus_per_worker is 0: the {role} "
                              f"engine ({cfg['type']}) would run on CPU. Set num_gpus_per_worker to its "
                              f"tensor_parallel_size x pipeline_parallel_size")


def _pg_strategy(bundles: list[dict]) -> dict:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = ray.util.placement_group(bundles, strategy="PACK")
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)}


def replica_bundles(gpus: int, cpus: float) -> list[dict]:
    """One bundle per GPU; the first also holds the actor's CPUs."""
    return [{"GPU": 1, "CPU": max(cpus, 1) if i == 0 else 1} for i in range(gpus)]


def actor_resources(engine_cfg, ex) -> dict:
    """``map_batches`` resource arguments for the engine actors of a run."""
    restart = {"max_restarts": ex.max_restarts, "max_task_retries": -1}
    if ex.mode == "serve":  # the actors are thin clients; the deployments hold the engines
        return {"num_cpus": 0.1, "num_gpus": 0, **restart}
    need = gpus_needed(engine_cfg)
    if need is not None and need > 1 and ex.num_gpus_per_worker > 0:
        bundles = replica_bundles(need, ex.num_cpus_per_worker)
        return {"num_cpus": bundles[0]["CPU"], "num_gpus": 0,
                "ray_remote_args_fn": partial(_pg_strategy, bundles), **restart}
    return {"num_cpus": ex.num_cpus_per_worker, "num_gpus": ex.num_gpus_per_worker, **restart}
