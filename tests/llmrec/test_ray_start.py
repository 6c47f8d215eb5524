"""One Ray start for every verb: ``llmrec.ray_start.start_ray`` is the only ``ray.init`` call, and it
keeps each verb's options (address, local CPUs, worker niceness, where workers' logs go)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
import types

import pytest

from llmrec import ray_start
from llmrec.ray_start import reap_local_sessions, start_ray
from tests.conftest import REPO


@pytest.fixture
def fake_ray(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))  # session records stay in the test's folder
    calls: list[dict] = []
    state = {"up": False}

    def init(**kw):
        calls.append(kw)
        state["up"] = True

    mod = types.SimpleNamespace(init=init, is_initialized=lambda: state["up"], cluster_resources=lambda: {})
    monkeypatch.setitem(sys.modules, "ray", mod)
    monkeypatch.setattr(ray_start, "_start_watchdog", lambda mark, record: None)  # no instance to watch
    return calls


def test_local_instance_gets_cpus_and_niceness(fake_ray, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert start_ray(None, num_cpus=2, worker_niceness=0, worker_logs=False) is True
    (kw,) = fake_ray
    assert kw["address"] == "local" and kw["num_cpus"] == 2 and kw["_system_config"] == {"worker_niceness": 0}
    assert kw["log_to_driver"] is False and kw["include_dashboard"] is False
    assert start_ray(None, num_cpus=4) is False and len(fake_ray) == 1  # already up: joined once


def test_local_instance_without_metrics_gets_the_quiet_config(fake_ray, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    start_ray(None, num_cpus=2, worker_niceness=0, worker_logs=False, metrics=False)
    (kw,) = fake_ray
    assert kw["_system_config"] == {"enable_metrics_collection": False, "event_stats": False,
                                    "task_events_report_interval_ms": 0, "worker_niceness": 0}


def test_no_address_but_ray_address_set_joins_that_cluster(fake_ray, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # a Ray job's driver
    monkeypatch.setattr(ray_start, "check_reachable", lambda address: None)  # no cluster in this test
    start_ray(None, num_cpus=2)
    (kw,) = fake_ray
    assert kw["address"] is None and "num_cpus" not in kw  # ray.init reads $RAY_ADDRESS


def test_joining_a_cluster_passes_no_local_options(fake_ray):
    start_ray("auto", num_cpus=2, worker_niceness=5, metrics=False)
    (kw,) = fake_ray
    assert kw["address"] == "auto" and kw["configure_logging"] is False
    assert not {"num_cpus", "_system_config", "include_dashboard"} & set(kw)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again once the block ends: nothing listens there


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}"])
def test_a_cluster_address_where_nothing_listens_fails_in_seconds_saying_what_to_do(fake_ray, form):
    """Ray retries an address where nothing listens without end; llmrec probes it first and fails in one line."""
    from llmrec.errors import ConfigError

    address = form.format(port=_closed_port())
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"ray.address .*no Ray cluster answers.*ray start --head") as e:
        start_ray(address)
    assert time.monotonic() - start < 10 and not fake_ray and "\n" not in str(e.value)


def test_a_cluster_address_that_answers_is_joined(fake_ray):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        start_ray(f"127.0.0.1:{sock.getsockname()[1]}")
    assert len(fake_ray) == 1


def test_a_ray_start_that_times_out_is_one_line_that_says_what_to_do(fake_ray, monkeypatch):
    from llmrec.errors import LlmrecError

    def init(**kw):
        raise Exception("The current node timed out during startup. This could happen because some of the raylet "
                        "failed to startup or the GCS has become overloaded.")

    monkeypatch.setattr(sys.modules["ray"], "init", init)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(LlmrecError, match="did not start in time.*re-run when it is less loaded") as e:
        start_ray(None, num_cpus=1)
    assert "\n" not in str(e.value) and e.value.exit_code == 1


def _inits(path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "init" and isinstance(n.func.value, ast.Name) and n.func.value.id == "ray"]


def test_ray_init_is_called_in_one_module_only():
    folders = ("llmrec", "pipelines", "serving", "models", "tuning", "cluster")
    found = {str(p.relative_to(REPO)): lines for f in folders for p in (REPO / f).rglob("*.py") if (lines := _inits(p))}
    assert list(found) == ["llmrec/ray_start.py"], found


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "300"])


def _record(cache, driver: list, processes: list[list]) -> None:
    (cache / "ray-local").mkdir(parents=True, exist_ok=True)
    (cache / "ray-local" / f"{driver[0]}.json").write_text(json.dumps({"driver": driver, "processes": processes}))


def test_a_killed_drivers_leftovers_are_stopped_and_nothing_else(tmp_path, monkeypatch):
    """The record of a driver that no longer runs: its processes that still run are killed (a pid now used
    by another process, told apart by its start time, is not); the record of a running driver is kept."""
    import psutil

    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead_stamp = [dead.pid, psutil.Process(dead.pid).create_time()]
    dead.wait()
    left, reused, other = _sleeper(), _sleeper(), _sleeper()
    try:
        stamp = lambda p: [p.pid, psutil.Process(p.pid).create_time()]  # noqa: E731
        _record(tmp_path, dead_stamp, [stamp(left), [reused.pid, stamp(reused)[1] - 100.0]])
        me = psutil.Process()
        _record(tmp_path, [me.pid, me.create_time()], [stamp(other)])
        assert reap_local_sessions() == [left.pid]
        assert left.wait(timeout=10) == -9 and reused.poll() is None and other.poll() is None
        assert [p.name for p in (tmp_path / "ray-local").iterdir()] == [f"{me.pid}.json"]
        assert reap_local_sessions() == []  # the running driver's record is left alone
    finally:
        for p in (left, reused, other):
            p.kill()


def test_start_ray_records_its_local_instance_and_reaps_first(fake_ray, tmp_path, monkeypatch):
    order, marks = [], []

    def init(**kw):
        marks.append(os.environ.get(ray_start.OWNER_ENV))  # what the processes ray.init starts inherit
        fake_ray.append(kw)

    monkeypatch.setattr(sys.modules["ray"], "init", init)
    monkeypatch.setattr(ray_start, "reap_local_sessions", lambda: order.append("reap"))
    monkeypatch.setattr(ray_start, "record_local_session", lambda mark: order.append(("record", mark)) or {})
    monkeypatch.setattr(ray_start, "_start_watchdog", lambda mark, record: order.append(("watchdog", mark)))
    start_ray(None, num_cpus=1)
    assert marks[0] and order == ["reap", ("record", marks[0]), ("watchdog", marks[0])]
    assert ray_start.OWNER_ENV not in os.environ  # processes this one starts later do not carry the mark


def test_the_stderr_filter_drops_only_rays_false_alarm():
    """In the llmrec command, what native code writes to fd 2 loses the known false alarm, nothing else;
    Python's sys.stderr keeps writing to the real stderr."""
    script = (
        "import os, sys\n"
        "from llmrec import ray_start\n"
        "ray_start.filter_false_alarms()\n"  # not the llmrec command: nothing is filtered
        "os.write(2, b'before constructor arguments in the object store and max_restarts > 0\\n')\n"
        "ray_start.quiet_false_alarms()\n"
        "ray_start.filter_false_alarms()\n"
        "ray_start.filter_false_alarms()\n"  # once: a second call adds no second filter
        "os.write(2, b'[E core_worker.cc:2465: Actor X has constructor arguments in the object store and "
        "max_restarts > 0. If ...\\n')\n"
        "os.write(2, b'native line kept\\n')\n"
        "print('python line kept', file=sys.stderr)\n"
        "import psutil; print(len(psutil.Process().children()))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stderr.splitlines()) == [
        "before constructor arguments in the object store and max_restarts > 0", "native line kept",
        "python line kept"]  # the false alarm written after the filter is not
    assert out.stdout.strip() == "1"  # one filter process


@pytest.mark.slow
@pytest.mark.integration
def test_a_local_start_never_joins_a_local_ray_another_process_started(tmp_path):
    """`ray.init()` without an address joins the local instance recorded in /tmp/ray (another llmrec run's, a
    test's) and then refuses num_cpus: the cause of test_tune_sweep_on_s3_resumes failing beside another Ray.
    start_ray(None) starts its own instance instead."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    other = subprocess.Popen([sys.executable, "-c", "import ray, time; ray.init(address='local', num_cpus=1, "
                              "include_dashboard=False); print(ray.get_runtime_context().gcs_address, flush=True); "
                              "time.sleep(600)"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        theirs = other.stdout.readline().strip()
        code = ("import ray; from llmrec.ray_start import start_ray; start_ray(None, 2); "
                "print(ray.get_runtime_context().gcs_address, ray.cluster_resources()['CPU']); ray.shutdown()")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                             cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        mine, cpus = res.stdout.split()[-2:]
        assert theirs and mine != theirs and float(cpus) == 2.0
    finally:
        other.terminate()
        other.wait(timeout=60)


def test_a_run_whose_console_is_its_progress_bar_gets_no_retry_notices(fake_ray, monkeypatch):
    """A budget stop ends its map actors with tasks in flight; Ray would print each as a "(raylet) Task MapWorker
    ... failed ... will be retried" line under the run's one line."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv(ray_start.RETRY_NOTICE_ENV, raising=False)
    start_ray(None, num_cpus=2, worker_logs=False)
    assert ray_start.RETRY_NOTICE_ENV == "RAY_enable_output_error_log_if_still_retry"
    assert __import__("os").environ[ray_start.RETRY_NOTICE_ENV] == "0"


def _marked_sleeper(mark: str) -> subprocess.Popen:
    return subprocess.Popen(["sleep", "300"], env={**os.environ, ray_start.OWNER_ENV: mark}, start_new_session=True)


def test_end_instance_kills_what_carries_the_mark_or_was_recorded(tmp_path):
    """After its driver: a worker the raylet started (it carries the instance's mark, whoever its parent is now) and
    a recorded process are killed once the grace period is over; another instance's and an unmarked one are not."""
    import psutil

    mine, recorded, theirs, plain = _marked_sleeper("m-1"), _sleeper(), _marked_sleeper("m-2"), _sleeper()
    try:
        stamps = json.dumps([[recorded.pid, psutil.Process(recorded.pid).create_time()]])
        t0 = time.monotonic()
        assert sorted(ray_start.end_instance("m-1", stamps, grace_s=0.5)) == sorted([mine.pid, recorded.pid])
        assert time.monotonic() - t0 >= 0.5  # they had their time to end on their own
        assert mine.wait(timeout=10) == -9 and recorded.wait(timeout=10) == -9
        assert theirs.poll() is None and plain.poll() is None
    finally:
        for p in (mine, recorded, theirs, plain):
            p.kill()


def test_the_watchdog_ends_the_instance_of_a_driver_killed_with_sigkill(tmp_path):
    """A driver's watchdog outlives it: kill -9 of the driver, and the process carrying its mark (a Ray worker whose
    raylet is gone) is killed a few seconds later."""
    script = ("import os, signal, subprocess, sys\n"
              "from llmrec import ray_start\n"
              "ray_start._start_watchdog('m-kill', {'processes': []})\n"
              "w = subprocess.Popen(['sleep', '300'], env={**os.environ, ray_start.OWNER_ENV: 'm-kill'}, "
              "start_new_session=True)\n"
              "print(w.pid, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == -9, out.stderr
    worker = int(out.stdout.split()[0])
    deadline = time.monotonic() + ray_start.WATCHDOG_GRACE_S + 20
    while _exists(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _exists(worker), "the marked process outlived its driver's watchdog"


def _exists(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
