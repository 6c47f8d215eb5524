"""Where engine actors go: Ray resources per actor, TP×PP placement groups, GPU-sharing checks.

An engine config declares what placement needs (``serving/engine.py``, ``EngineConfig``):
``gpus_per_replica`` for engines that span several GPUs (e.g. tensor × pipeline parallel size)
and ``gpu_share`` for engines that take a share of each GPU's memory (None where neither applies). As in ``ray.data.llm``'s LLM stage, a multi-GPU replica gets a placement group
of one ``{GPU: 1, CPU: 1}`` bundle per GPU (PACK: on one node when it fits) that captures child
tasks, and the actor itself reserves no GPU: the engine's Ray executor places its TP/PP workers
in that group. In actors mode a (non-remote) judge gets actors of its own
(``execution.judge_replicas``) with its own CPUs/GPUs, so it shares no GPU with the subject.
Dead actors are restarted by Ray (``max_restarts``) and their batch re-run
(``max_task_retries``); see ``StageWorker`` for how an engine death ends the actor.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from functools import partial

from llmrec.errors import ConfigError


def gpus_needed(engine_cfg) -> int | None:
    """GPUs one replica of this engine needs, when the engine says (None: any count works, or no engine)."""
    return None if engine_cfg is None else engine_cfg.gpus_per_replica


def judge_pooled(judge, ex) -> bool:
    """Whether the judge runs in its own engine actors (``execution.judge_replicas`` > 0 in actors
    mode, and an engine that runs in-process: a remote judge such as ``openai`` stays a client
    inside the subject actors)."""
    from llmrec.serving.engine_pool import runs_in_process

    return judge is not None and ex.mode == "actors" and ex.judge_replicas > 0 and runs_in_process(judge)


def judge_gpus(ex) -> float:
    return ex.num_gpus_per_worker if ex.judge_num_gpus_per_worker is None else ex.judge_num_gpus_per_worker


def judge_cpus(ex) -> float:
    return ex.num_cpus_per_worker if ex.judge_num_cpus_per_worker is None else ex.judge_num_cpus_per_worker


def _role_gpus(ex, pooled: bool) -> tuple[tuple[str, float, str], ...]:
    judge_key = "execution.judge_num_gpus_per_worker" if pooled else "execution.num_gpus_per_worker"
    return (("engine", ex.num_gpus_per_worker, "execution.num_gpus_per_worker"),
            ("judge", judge_gpus(ex) if pooled else ex.num_gpus_per_worker, judge_key))


def placement_errors(engine, judge, ex) -> list[str]:
    """Static checks of a run's GPU placement (no cluster needed); empty when consistent."""
    errors: list[str] = []
    if ex.mode != "actors":
        return errors
    pooled = judge_pooled(judge, ex)
    for (role, gpus, key), cfg in zip(_role_gpus(ex, pooled), (engine, judge)):
        need = gpus_needed(cfg) if cfg is not None else None
        if need is not None and gpus != 0 and gpus != need:
            errors.append(f"{key} is {gpus:g} but {role} needs tensor_parallel_size x pipeline_parallel_size "
                          f"= {need} GPU(s) per replica; set them equal")
    shares = [c.gpu_share for c in (engine, judge) if c is not None]
    if len(shares) != 2 or None in shares or sum(shares) <= 0.95:
        return errors
    if not pooled and ex.num_gpus_per_worker > 0:
        why = "with execution.judge_replicas: 0 the judge shares the subject's GPU(s) (one actor holds both)"
    elif pooled and 0 < ex.num_gpus_per_worker < 1 and 0 < judge_gpus(ex) < 1:
        why = (f"the subject's and the judge's actors reserve fractions of a GPU ({ex.num_gpus_per_worker:g}, "
               f"{judge_gpus(ex):g}), so Ray may put both on one GPU")
    else:
        return errors
    errors.append(f"in mode 'actors' {why}, but the engine's share of GPU memory ({shares[0]}) + the "
                  f"judge's ({shares[1]}) > 0.95: they would run out of memory. Give the "
                  f"judge actors of their own with whole GPUs (execution.judge_replicas >= 1, "
                  f"judge_num_gpus_per_worker), use execution.mode: serve (separate deployments), or lower both "
                  f"so that they sum to at most 0.95")
    return errors


def check_gpu_placement(engines: dict, ex) -> None:
    """Runtime check: a multi-GPU-capable engine on a GPU cluster with no GPU reserved is refused. ``engines``: role
    → its validated ``EngineConfig``."""
    import ray

    if ex.mode != "actors":
        return
    gpus = ray.cluster_resources().get("GPU", 0)
    pooled = "judge" in engines and judge_pooled(engines["judge"], ex)
    for role, reserved, key in _role_gpus(ex, pooled):
        cfg = engines.get("subject" if role == "engine" else role)
        if cfg is not None and reserved == 0 and gpus and gpus_needed(cfg) is not None:
            raise ConfigError(f"the cluster has {gpus:g} GPU(s) but {key} is 0: the {role} engine "
                              f"({cfg.type}) would run on CPU. Set it to its "
                              f"tensor_parallel_size x pipeline_parallel_size")


def _pg_strategy(bundles: list[dict]) -> dict:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = ray.util.placement_group(bundles, strategy="PACK")
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)}


def replica_bundles(gpus: int, cpus: float) -> list[dict]:
    """One bundle per GPU; the first also holds the actor's CPUs."""
    return [{"GPU": 1, "CPU": max(cpus, 1) if i == 0 else 1} for i in range(gpus)]


@contextmanager
def actor_options_accepted():
    """Around ``map_batches(..., **actor_resources(...))``: Ray 2.60 deprecates ``**ray_remote_args`` and
    ``ray_remote_args_fn`` (removal announced for 2.64) but has no named parameter yet for what llmrec
    passes there: ``max_restarts`` / ``max_task_retries`` (the bounded restarts of ``execution.max_restarts``)
    and a placement group per actor (TP x PP replicas; ray-project/ray#65228 defers those). Dropping
    them would silently change fault handling (Ray Data's default restarts without limit), so they are
    kept, and the warning, which a user can do nothing about, is not printed. Revisit on a Ray upgrade."""
    from ray.util.annotations import RayDeprecationWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`ray_remote_args(_fn)?` is deprecated",
                                category=RayDeprecationWarning)
        yield


def actor_resources(engine_cfg, ex, thin: bool = False) -> dict:
    """``map_batches`` resource arguments for the engine actors of a run (``thin``: they hold no
    engine, only clients of engines elsewhere, e.g. a suite's shared subject pool)."""
    restart = {"max_restarts": ex.max_restarts, "max_task_retries": -1}
    if ex.mode == "serve" or thin:  # the actors are thin clients; deployments or engine pools hold the engines
        return {"num_cpus": 0.1, "num_gpus": 0, **restart}
    need = gpus_needed(engine_cfg)
    if need is not None and need > 1 and ex.num_gpus_per_worker > 0:
        bundles = replica_bundles(need, ex.num_cpus_per_worker)
        return {"num_cpus": bundles[0]["CPU"], "num_gpus": 0,
                "ray_remote_args_fn": partial(_pg_strategy, bundles), **restart}
    return {"num_cpus": ex.num_cpus_per_worker, "num_gpus": ex.num_gpus_per_worker, **restart}


def pool_resources(engine_cfg, cpus: float, gpus: float, max_restarts: int) -> dict:
    """``serving.engine_pool.start_engine_pool`` resource arguments for a pool of one engine's
    actors (one placement group of TP x PP bundles per actor when a replica spans several GPUs)."""
    need = gpus_needed(engine_cfg)
    if need is not None and need > 1 and gpus > 0:
        bundles = replica_bundles(need, cpus)
        return {"num_cpus": bundles[0]["CPU"], "num_gpus": 0, "bundles": bundles, "max_restarts": max_restarts}
    return {"num_cpus": cpus, "num_gpus": gpus, "bundles": None, "max_restarts": max_restarts}


def judge_pool_resources(judge_cfg, ex) -> dict:
    """The judge's own actors: the judge's CPUs and GPUs."""
    return pool_resources(judge_cfg, judge_cpus(ex), judge_gpus(ex), ex.max_restarts)


def subject_pool_resources(engine_cfg, ex) -> dict:
    """A subject pool shared by a suite's runs: what one subject actor of a run would reserve."""
    return pool_resources(engine_cfg, ex.num_cpus_per_worker, ex.num_gpus_per_worker, ex.max_restarts)


def replica_placement(engine, ex, gpus_per_node: int) -> str:
    """One line for ``llmrec plan``: what one subject replica reserves and how many nodes the run spans."""
    need = gpus_needed(engine)
    if need is None:
        return (f"placement: {ex.concurrency} replica(s) of {ex.num_cpus_per_worker:g} CPU, "
                f"{ex.num_gpus_per_worker:g} GPU each")
    per_node = gpus_per_node // need
    return (f"placement: {need} bundle(s) {{GPU: 1, CPU: 1}} per replica; {per_node} replica(s) per "
            f"{gpus_per_node}-GPU node; {ex.concurrency} replica(s) -> {-(-ex.concurrency // max(per_node, 1))} node(s)")


def judge_placement(judge, ex) -> str:
    """One line for ``llmrec plan``: where the judge runs and what its actors reserve."""
    if judge is None:
        return "judge: none"
    if ex.mode == "serve":
        return f"judge: its own Serve app ({judge.type}), {ex.concurrency} replica(s)"
    if not judge_pooled(judge, ex):
        why = "a remote API" if ex.judge_replicas > 0 else "execution.judge_replicas: 0"
        return f"judge: {judge.type} inside each subject actor ({why})"
    res = judge_pool_resources(judge, ex)
    what = (f"{len(res['bundles'])} bundle(s) {{GPU: 1, CPU: 1}}" if res["bundles"]
            else f"{res['num_cpus']:g} CPU, {res['num_gpus']:g} GPU")
    return f"judge: {ex.judge_replicas} {judge.type} actor(s) of its own, each {what}; shares no GPU with the subject"


def _actor_totals(cfg, cpus: float, gpus: float) -> tuple[float, float]:
    """CPUs and GPUs one engine actor takes, its placement group's bundles included."""
    need = gpus_needed(cfg)
    if need is not None and need > 1 and gpus > 0:
        return sum(b["CPU"] for b in replica_bundles(need, cpus)), float(need)
    return cpus, gpus


def shortfalls(engine, judge, ex, cluster: dict) -> list[str]:
    """Warnings when the subject actors plus the judge's own actors need more CPUs/GPUs than the
    cluster has now (some actors would wait for resources, or for an autoscaler to add nodes)."""
    sub = _actor_totals(engine, ex.num_cpus_per_worker, ex.num_gpus_per_worker)
    jud = _actor_totals(judge, judge_cpus(ex), judge_gpus(ex))
    out = []
    for i, kind in enumerate(("CPU", "GPU")):
        need = ex.concurrency * sub[i] + ex.judge_replicas * jud[i]
        if need > cluster.get(kind, 0):
            out.append(f"{ex.concurrency} subject actor(s) ({sub[i]:g} {kind} each) and {ex.judge_replicas} judge "
                       f"actor(s) ({jud[i]:g} {kind} each) need {need:g} {kind} but the cluster has "
                       f"{cluster.get(kind, 0):g}: some will wait for resources (an autoscaling cluster adds nodes). "
                       f"Lower execution.concurrency / judge_replicas or their per-worker {kind}s")
    return out


def role_reservations(engine, judge, ex, shared_subject: bool = False) -> dict[str, tuple[float, float]]:
    """role → (CPUs, GPUs) a run holds for that role while its engines are up, busy or not (the cost ledger's
    reserved seconds). The subject: its ``execution.concurrency`` engine actors or Serve replicas (TP x PP
    bundles included), plus the thin client actors in front of a Serve app or a suite's shared subject pool
    (``shared_subject``). The judge: its own actors (``judge_replicas``) or Serve replicas; a judge inside the
    subject actors holds nothing of its own (its share is the subject's)."""
    n = ex.concurrency
    if ex.mode == "serve":
        out = {"subject": (n * ex.num_cpus_per_worker + n * 0.1, n * ex.num_gpus_per_worker)}
        if judge is not None:
            out["judge"] = (n * ex.num_cpus_per_worker, n * ex.num_gpus_per_worker)
        return out
    cpus, gpus = _actor_totals(engine, ex.num_cpus_per_worker, ex.num_gpus_per_worker)
    out = {"subject": (n * cpus + (n * 0.1 if shared_subject else 0.0), n * gpus)}
    if judge_pooled(judge, ex):
        cpus, gpus = _actor_totals(judge, judge_cpus(ex), judge_gpus(ex))
        out["judge"] = (ex.judge_replicas * cpus, ex.judge_replicas * gpus)
    return out
