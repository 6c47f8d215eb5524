"""Real infrastructure for runtime tests: an S3 API (moto server) and a multi-node Ray cluster,
both on 127.0.0.1 with free ports."""

from __future__ import annotations

import contextlib
import os
import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_server(bucket: str = "llmrec-test"):
    """A moto S3 server on 127.0.0.1; AWS_* variables point pyarrow and boto3 at it."""
    import pytest

    pytest.importorskip("moto.server", reason="moto[server] (dev extra) runs the S3 API for storage tests")
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        boto3.client("s3").create_bucket(Bucket=bucket)
        yield bucket
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def s3_keys(bucket: str, prefix: str = "") -> list[str]:
    import boto3

    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/"))


@contextlib.contextmanager
def ray_cluster(head_cpus: float = 0, workers: tuple[dict, ...] = ({"num_cpus": 2}, {"num_cpus": 2})):
    """Head + worker nodes, each its own raylet on 127.0.0.1, and this process connected as driver.
    Any Ray already initialised in this process is shut down first and restarted after."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    from tests.conftest import ray_stopped

    with ray_stopped():
        # a local cluster: addresses stay on the loopback (no remote-reachable IP lookup)
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        saved, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": head_cpus, "node_ip_address": "127.0.0.1", "gcs_server_port": free_port(),
            "include_dashboard": False, "resources": {"head": 1}})
        nodes = [cluster.add_node(node_ip_address="127.0.0.1", **w) for w in workers]
        try:
            ray.init(address=cluster.address, log_to_driver=False)
            yield cluster, nodes
        finally:
            ray.shutdown()
            cluster.shutdown()
            ray_constants.ENABLE_RAY_CLUSTER = saved
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
