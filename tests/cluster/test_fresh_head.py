"""A head started as the cluster guide starts it (docs/cluster.md, section 1): every server it runs listens on the
loopback only, and `llmrec submit`'s submission, sent the moment its dashboard answers (before its job agent is up),
waits for the agent and goes through."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time

import psutil
import pytest

from tests.cluster.servers import auth_env, ray_head

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    return (getattr(addr, "ipv4_mapped", None) or addr).is_loopback


# the submitter: its own process, so that Ray reads the token from its environment (Ray keeps the auth mode it
# found first in a process); the job submitted the moment the dashboard answers, then followed to its end
SUBMIT = """
import sys, time
from ray.job_submission import JobSubmissionClient
from llmrec.cluster.jobs import JobSpec, submit_when_ready
client = JobSubmissionClient(sys.argv[1])
job = submit_when_ready(client, JobSpec(sys.argv[2], "echo fresh", {}), wait_s=120, say=lambda m: print("SAID", m))
deadline = time.monotonic() + 180
while str(client.get_job_status(job).value) not in ("SUCCEEDED", "FAILED", "STOPPED") and time.monotonic() < deadline:
    time.sleep(1)
print("STATUS", client.get_job_status(job).value)
"""


def test_a_fresh_head_binds_the_loopback_and_takes_a_job_at_once(tmp_path):
    auth = auth_env()
    with ray_head(tmp_path, auth, num_cpus=1) as url:  # returns once the dashboard answers
        sub = subprocess.Popen([sys.executable, "-c", SUBMIT, url, f"llmrec-fresh-{os.getpid()}"],
                               env={**os.environ, **auth}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        mine = f"ray-t{os.getpid()}-{url.rsplit(':', 1)[1]}"  # the head's temp folder, in its processes' arguments
        # the dashboard can answer before the raylet has started (seen on a loaded machine): wait for both servers
        deadline = time.monotonic() + 90
        while True:
            procs = [p for p in psutil.process_iter(["cmdline"]) if mine in " ".join(p.info["cmdline"] or [])]
            names = {p.name() for p in procs}
            if {"gcs_server", "raylet"} <= names or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert {"gcs_server", "raylet"} <= names, names
        listening = [(p.name(), c.laddr.ip, c.laddr.port) for p in procs for c in p.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and not [s for s in listening if not _loopback(s[1])], listening
        out, err = sub.communicate(timeout=400)
        assert sub.returncode == 0 and "STATUS SUCCEEDED" in out, out + err[-3000:]
