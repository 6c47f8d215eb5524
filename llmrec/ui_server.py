"""`llmrec ui`: the MLflow UI on 127.0.0.1, and the links that open each experiment's runs table.

The server is MLflow's own (``mlflow server``), run as one uvicorn process: MLflow's default of 4 uvicorn
workers runs them under uvicorn's supervisor, and on 2 busy cores a worker needs longer than the supervisor's
5 s health check to import MLflow's server, so the supervisor kills and restarts workers again and again
("Child process died") and the UI answers after minutes. One worker has no supervisor and is plenty for one
person's browser. The job runner (GenAI judge jobs, which llmrec does not use) is left off, and so is
uvicorn's line per HTTP request.

The links are read from the running server's REST API once it answers, so the UI's start is the only MLflow
import on the way to the first page, and every link printed already opens.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from typing import Callable

import requests

from llmrec.tracking import ui_url

JOB_EXECUTION_ENV = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def server_command(store: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The ``mlflow server`` command line and its environment additions."""
    return ([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store, "--registry-store-uri", store,
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--uvicorn-opts", "--no-access-log --log-level warning"],
            {JOB_EXECUTION_ENV: "false", "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore:starlette.middleware.wsgi is deprecated"})


# what the server says on every start, none of it about this start: left off the terminal
START_NOISE = ("[MLflow] Security middleware enabled with default settings",)


def pass_on(stream, out) -> None:
    """Copy the server's output to ``out`` line by line, leaving off ``START_NOISE``."""
    for line in iter(stream.readline, ""):
        if not line.startswith(START_NOISE):
            out.write(line)
            out.flush()


def experiment_links(base: str, timeout: float = 30) -> list[tuple[str, str]]:
    """(name, runs-table link) of the server's experiments, most recently updated first; the empty
    ``Default`` experiment MLflow creates is left out unless it is the only one."""
    r = requests.post(f"{base.rstrip('/')}/api/2.0/mlflow/experiments/search",
                      json={"max_results": 1000, "order_by": ["last_update_time DESC"]}, timeout=timeout)
    r.raise_for_status()
    exps = r.json().get("experiments", [])
    shown = [e for e in exps if e["name"] != "Default"] or exps
    return [(e["name"], ui_url(base, e["experiment_id"])) for e in shown]


def wait_until_up(base: str, proc: subprocess.Popen, limit_s: float = 600) -> bool:
    """True once the server answers ``/health``; False when it exited or ``limit_s`` passed."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if requests.get(f"{base}/health", timeout=2).status_code == 200:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.3)
    return False


def serve(store: str, port: int, say: Callable[[str], None], warn: Callable[[str], None]) -> int:
    """Run the UI for ``store`` on 127.0.0.1:``port`` until it stops (Ctrl-C / SIGTERM are passed on to it);
    print the experiments' links once it answers. Returns the server's exit code."""
    import os

    argv, env = server_command(store, port)
    proc = subprocess.Popen(argv, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True, bufsize=1)
    threading.Thread(target=pass_on, args=(proc.stderr, sys.stderr), daemon=True).start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: proc.poll() is None and proc.send_signal(signum))
    base = f"http://127.0.0.1:{port}"
    if wait_until_up(base, proc):
        try:
            links = experiment_links(base)
        except (requests.RequestException, ValueError, KeyError) as e:
            warn(f"could not list the experiments of {store}: {e}")
            links = []
        for name, link in links:
            say(f"{name}: {link}")
        say(f"MLflow UI (store {store}): {links[0][1] if links else base}")
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # the signal was passed on; wait for the server to stop
            continue
