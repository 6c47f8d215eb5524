"""On a real multi-node Ray cluster (head + 2 worker raylets on 127.0.0.1): the request cache is
one cache across nodes, and a worker node killed mid-run loses and duplicates nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.run_config import load_run_config
from tests.pipelines.conftest import config
from tests.runtime.helpers import ray_cluster

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

WORKERS = ({"num_cpus": 2, "resources": {"w0": 1}}, {"num_cpus": 2, "resources": {"w1": 1}})


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(head_cpus=0, workers=WORKERS) as c:
        yield c


def test_cache_service_is_shared_by_actors_on_two_nodes(tmp_path, cluster):
    import ray

    from llmrec.serving.cache_service import start_cache_service, stop_cache_service

    head_id = ray.get_runtime_context().get_node_id()
    service = start_cache_service(str(tmp_path / "cache.sqlite"), "llmrec-cache-test")

    @ray.remote(num_cpus=0.5)
    class Client:
        def __init__(self, handle):
            from llmrec.serving.cache import CachedEngine
            from llmrec.serving.cache_service import RemoteRequestCache
            from llmrec.serving.engines.fake import FakeEngine, FakeEngineConfig

            self.engine = CachedEngine(FakeEngine(FakeEngineConfig(default="hi")), RemoteRequestCache(handle))

        def ask(self, texts: list[str]):
            from llmrec.types import Message, Request

            out = self.engine.generate([Request(messages=[Message(role="user", content=t)]) for t in texts])
            return [r.from_cache for r in out], ray.get_runtime_context().get_node_id()

    a = Client.options(resources={"w0": 0.5}).remote(service)
    b = Client.options(resources={"w1": 0.5}).remote(service)
    hits_a, node_a = ray.get(a.ask.remote(["x", "y"]))
    hits_b, node_b = ray.get(b.ask.remote(["x", "y", "z"]))
    assert node_a != node_b and head_id not in (node_a, node_b)
    assert hits_a == [False, False] and hits_b == [True, True, False]
    # concurrent writers on both nodes: every insert lands once in the one file
    words = [[f"w{i}-{j}" for j in range(20)] for i in range(6)]
    ray.get([(a if i % 2 else b).ask.remote(ws) for i, ws in enumerate(words)])
    assert ray.get(service.size.remote()) == 3 + 6 * 20
    stop_cache_service(service)


def _run(cfg_path: Path, sets: list[str], data_root: Path, out: dict) -> None:
    from llmrec.pipelines.runner.api import run_evaluation

    try:
        out["outcome"] = run_evaluation(load_run_config(cfg_path, sets), data_root)
    except BaseException as e:  # noqa: BLE001 - re-raised by the test thread
        out["error"] = e


def _actor_nodes() -> set[str]:
    """Nodes hosting a live engine actor (from the GCS actor table: no dashboard runs here)."""
    import ray

    table = ray._private.state.state.actor_table(None)
    return {a["Address"]["NodeID"] for a in table.values()
            if a["State"] == "ALIVE" and "StageWorker" in a.get("ActorClassName", "")}


def test_worker_node_killed_mid_run_loses_nothing(tmp_path, data_root, cluster):
    c, nodes = cluster
    engine = {"type": "fake", "rules": [{"contains": "Las Vegas", "reply": "<choice>C</choice>"}],
              "default": "<choice>A</choice>", "delay_s": 0.25}
    path = config(tmp_path, engine=engine)
    base = ["execution.concurrency=2", "execution.batch_size=2", "ray.num_cpus=null", "output.cache=false"]
    box: dict = {}
    t = threading.Thread(target=_run, args=(path, base + ["output.run_name=chaos"], data_root, box))
    t.start()
    results = tmp_path / "runs" / "chaos" / "results"
    deadline = time.monotonic() + 120
    victim = None
    while time.monotonic() < deadline and victim is None:
        busy = _actor_nodes()
        done = len(list(results.glob("*.parquet"))) if results.exists() else 0
        if done >= 1 and busy:
            victim = next((n for n in nodes if n.node_id in busy), None)
        time.sleep(0.2)
    assert victim is not None, "no engine actor ran on a worker node"
    c.remove_node(victim, allow_graceful=False)  # raylet and its workers gone
    killed_at = len(ResultStore(results).load())
    t.join(timeout=300)
    assert not t.is_alive() and "error" not in box, box.get("error")
    n = 32
    assert 0 < killed_at < n
    ids = [i for s in ResultStore(results).shards() for i in pq.read_table(results / s).column("sample_id").to_pylist()]
    assert len(ids) == len(set(ids)) == n  # none lost, none written twice
    chaos = box["outcome"]
    # the uninterrupted reference on the same cluster: one engine actor, no pause before each reply (neither is part
    # of a reply: the same answers, with less to start and nothing to wait for)
    ref_box: dict = {}
    _run(path, base + ["output.run_name=calm", "execution.concurrency=1", "engine.delay_s=0"], data_root, ref_box)
    assert "error" not in ref_box, ref_box.get("error")
    assert chaos.metrics == ref_box["outcome"].metrics
