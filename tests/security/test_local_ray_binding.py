"""A local run's Ray listens on the loopback only: its GCS, raylet, workers (an actor and a task run, as in a
run) and agents have no socket a stranger on the network could reach. Started in a child process, as `llmrec run`
starts it (``llmrec.ray_start.start_ray`` with no address), so the test sees exactly the processes it starts."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = r"""
import json, sys, time
import psutil, ray
from llmrec.ray_start import start_ray

start_ray(None, num_cpus=1, worker_niceness=0, worker_logs=False)

@ray.remote
class Holder:
    def ping(self):
        return 1

@ray.remote
def task():
    return 2

h = Holder.remote()
assert ray.get([h.ping.remote(), task.remote()]) == [1, 2]
time.sleep(3)  # agents finish starting
me = psutil.Process()
procs = {p.pid: p.name() for p in [me, *me.children(recursive=True)]}
found = [[procs[c.pid], c.laddr.ip, c.laddr.port] for c in psutil.net_connections(kind="inet")
         if c.status == psutil.CONN_LISTEN and c.pid in procs]
print("LISTEN " + json.dumps({"sockets": found, "names": sorted(set(procs.values()))}))
ray.shutdown()
"""


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def _listening(extra_env: dict | None = None) -> dict:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(extra_env or {})}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # Ray's own default: a cluster node on the outward address
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=240)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("LISTEN ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(line[len("LISTEN "):])


@pytest.mark.integration  # a local Ray in its own process, its sockets read from outside
def test_every_listening_socket_of_a_local_ray_is_on_the_loopback():
    seen = _listening()
    names = {name for name, _, _ in seen["sockets"]}
    assert {"gcs_server", "raylet"} <= names, seen  # the probe sees Ray's servers
    exposed = [s for s in seen["sockets"] if not _loopback(s[1])]
    assert not exposed, f"listening beyond the loopback: {exposed}"
