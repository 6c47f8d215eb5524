"""`make chaos`: fault scenarios on a local multi-node Ray cluster, measured.

A head (no CPUs: it hosts the driver, the result store writes and the request-cache service)
and two worker nodes, each its own raylet on 127.0.0.1, run the PrefEval demo slice with the
real embedded llama.cpp model. First an undisturbed run (the reference), then:

  node-kill    a worker node hosting an engine actor is killed mid-run (raylet + workers gone);
               a replacement node joins afterwards
  actor-kill   one engine actor's process is SIGKILLed mid-run (Ray restarts it; its batch reruns)
  driver-kill  `llmrec run` as a separate driver is `kill -9`ed mid-run, then re-run: it resumes

Each scenario is checked against the result store: every sample present once (lost = missing
sample ids, duplicated = records written more than once across shards) and metrics equal to
the reference. The last line printed is ``chaos: scenarios=S samples=N lost=L duplicated=D``.

    python perf/chaos.py [CONFIG] [--set key=value ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmrec.pipelines.common.store import ResultStore  # noqa: E402
from llmrec.pipelines.runner.api import run_evaluation  # noqa: E402
from llmrec.pipelines.runner.run_config import load_run_config  # noqa: E402
from tests.runtime.helpers import ray_cluster  # noqa: E402

log = logging.getLogger("chaos")
WORKER = {"num_cpus": 2}


def engine_actors() -> list[dict]:
    import ray

    return [a for a in ray._private.state.state.actor_table(None).values()
            if a["State"] == "ALIVE" and "StageWorker" in a.get("ActorClassName", "")]


def wait_for_progress(results: Path, timeout_s: float = 900) -> None:
    """Until the first shard is written and an engine actor is alive."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if results.exists() and any(results.glob("*.parquet")) and engine_actors():
            return
        time.sleep(0.5)
    raise TimeoutError(f"no progress in {results} after {timeout_s:.0f}s")


def in_thread(cfg, data_dir) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def target():
        try:
            box["outcome"] = run_evaluation(cfg, data_dir)
        except BaseException as e:  # noqa: BLE001 - reported by the scenario
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    return t, box


def count(results: Path, n: int) -> tuple[int, int]:
    ids = [i for s in ResultStore(results).shards() for i in pq.read_table(results / s).column("sample_id").to_pylist()]
    return n - len(set(ids)), len(ids) - len(set(ids))


def node_kill(cluster, nodes, cfg, data_dir, results) -> dict:
    t, box = in_thread(cfg, data_dir)
    wait_for_progress(results)
    busy = {a["Address"]["NodeID"] for a in engine_actors()}
    victim = next(n for n in nodes if n.node_id in busy)
    done = len(ResultStore(results).load())
    cluster.remove_node(victim, allow_graceful=False)
    nodes.remove(victim)
    t.join()
    nodes.append(cluster.add_node(node_ip_address="127.0.0.1", **WORKER))  # capacity back for what follows
    return {**box, "note": f"killed node {victim.node_id[:12]} after {done} samples"}


def actor_kill(cluster, nodes, cfg, data_dir, results) -> dict:
    t, box = in_thread(cfg, data_dir)
    wait_for_progress(results)
    actor = engine_actors()[0]
    done = len(ResultStore(results).load())
    os.kill(actor["Pid"], signal.SIGKILL)
    t.join()
    return {**box, "note": f"killed engine actor pid {actor['Pid']} after {done} samples"}


def driver_kill(cluster, nodes, cfg_path, sets, data_dir, results) -> dict:
    cmd = [sys.executable, "-m", "llmrec.cli", "run", str(cfg_path)] + (["--data-dir", str(data_dir)] if data_dir else [])
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_progress(results)
        done = len(ResultStore(results).load())
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9 the driver (its own process group only)
        proc.wait()
    out = run_evaluation(load_run_config(cfg_path, sets), data_dir)
    return {"outcome": out, "note": f"driver killed after {done} samples; re-run resumed "
                                    f"{out.stats['samples_resumed']:.0f}, ran {out.stats['samples_new']:.0f}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", default=str(REPO / "configs/prefeval_mcq_demo.yaml"))
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--out", default=None, help="folder for run directories (default: a temporary one)")
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    out_dir = Path(a.out or tempfile.mkdtemp(prefix="llmrec-chaos-")).resolve()
    data_dir = Path(a.data_dir).resolve() if a.data_dir else None
    with ray_cluster(head_cpus=0, workers=(WORKER, WORKER)) as (cluster, nodes):
        nodes = list(nodes)
        base = a.sets + [f"ray.address={cluster.address}", f"output.dir={out_dir}", "output.cache=false",
                         "tracking.enabled=false", "execution.concurrency=2", "execution.batch_size=2",
                         "execution.num_cpus_per_worker=1"]
        if "llamacpp" in Path(a.config).read_text():
            base.append("engine.n_threads=1")

        def sets(name: str) -> list[str]:
            return base + [f"output.run_name={name}"]

        t0 = time.monotonic()
        ref = run_evaluation(load_run_config(a.config, sets("calm")), data_dir)
        n = int(ref.metrics.get("n_samples", len(ResultStore(out_dir / "calm" / "results").load())))
        print(f"reference: {n} samples in {time.monotonic() - t0:.0f}s, metrics {json.dumps(ref.metrics, sort_keys=True)}",
              flush=True)
        scenarios = {
            "node-kill": lambda r: node_kill(cluster, nodes, load_run_config(a.config, sets("node-kill")), data_dir, r),
            "actor-kill": lambda r: actor_kill(cluster, nodes, load_run_config(a.config, sets("actor-kill")), data_dir, r),
            "driver-kill": lambda r: driver_kill(cluster, nodes, a.config, sets("driver-kill"), data_dir, r),
        }
        total = lost = dup = 0
        failed = []
        for name, fn in scenarios.items():
            results = out_dir / name / "results"
            t0 = time.monotonic()
            res = fn(results)
            if "error" in res:
                failed.append(name)
                print(f"{name}: FAILED {type(res['error']).__name__}: {res['error']}", flush=True)
                continue
            lo, du = count(results, n)
            same = res["outcome"].metrics == ref.metrics
            total, lost, dup = total + n, lost + lo, dup + du
            if not same or lo or du:
                failed.append(name)
            print(f"{name}: {res['note']}; {time.monotonic() - t0:.0f}s; samples={n} lost={lo} duplicated={du} "
                  f"metrics {'equal to' if same else 'DIFFERENT from'} the reference", flush=True)
    print(f"chaos: scenarios={len(scenarios)} samples={total} "
          f"lost={lost} duplicated={dup}" + (f" failed={','.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
