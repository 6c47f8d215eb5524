"""The one place a process starts or joins Ray: ``llmrec run`` / ``serve`` / ``serve-cleanup`` (through
the runner's ``RayConfig``), ``llmrec train`` / ``tune`` and ``llmrec sft``.

A local instance listens on 127.0.0.1 only: its GCS, raylet, workers and agents have no authentication a
stranger on the network could not pass, so they are not on the network at all (Ray's own default is every
interface). No dashboard is started. To open a local instance on purpose (e.g. to let another machine join
it), set ``$LLMREC_RAY_HOST`` to this machine's address; see docs/cluster.md, "What listens where".

A local instance ends with the process that started it, however that process ends: its processes carry a mark
(``OWNER_ENV``) and a watchdog process kills what is left of them a few seconds after the driver is gone
(``_start_watchdog``); the next local start reaps what a killed watchdog left (``reap_local_sessions``).

Below every layer that drives Ray (the runner, tuning, SFT), so each of them may import it; Ray itself
is imported only when called.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from llmrec import settings
from llmrec.errors import ConfigError, RunFailed

log = logging.getLogger(__name__)

# Lines Ray's native code prints to the driver's stderr that report nothing wrong with an llmrec run. Ray Data
# hands its DataContext and map transformer to every actor of a map_batches pool by ObjectRef, so Ray's core
# worker logs an ERROR for each pool whose actors may restart ("... has constructor arguments in the object store
# and max_restarts > 0", ray-project/ray#57733); those objects are the driver's own puts, alive as long as the
# pool, so the restart it warns about works. Ray still writes the line to the driver's log in the session folder.
RAY_FALSE_ALARMS = ("has constructor arguments in the object store and max_restarts > 0",)
# the filter process: copies its stdin to its stdout line by line, dropping lines holding one of its arguments
_FILTER = ("import sys\nout = sys.stdout.buffer\ndrop = [a.encode() for a in sys.argv[1:]]\n"
           "for line in sys.stdin.buffer:\n    if not any(d in line for d in drop):\n"
           "        out.write(line)\n        out.flush()\n")
_quiet = {"wanted": False, "done": False}
RAY_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # Ray's switch: "0" keeps a node on the loopback address
LOCAL_SESSIONS_DIR = "ray-local"  # under the per-user cache: one record per local Ray instance llmrec started
# The mark of a local instance's processes: set in the environment its GCS and raylet start with, so that every
# worker the raylet starts later (engine actors, Ray Data's map actors) inherits it, whoever its parent is by then
OWNER_ENV = "LLMREC_RAY_OWNER"
WATCHDOG_GRACE_S = 5.0  # after its driver ended, how long a local instance's processes get to end on their own
# the watchdog: waits for end of file on its stdin (the driver holds the only writer, so it comes however the driver
# ends: a return, an exception, SIGTERM, kill -9), then ends what is left of the instance (:func:`end_instance`)
_WATCHDOG = ("import sys\nsys.stdin.buffer.read()\nfrom llmrec.ray_start import end_instance\n"
             "end_instance(sys.argv[1], sys.argv[2])\n")


def quiet_false_alarms() -> None:
    """Called by the ``llmrec`` command's entry point (never by a library caller, nor a test's in-process
    CLI runner): this process's stderr is its own to filter (see :func:`filter_false_alarms`)."""
    _quiet["wanted"] = True


def filter_false_alarms() -> None:
    """Keep the lines of :data:`RAY_FALSE_ALARMS` off this process's stderr from now on, when it is the
    ``llmrec`` command (:func:`quiet_false_alarms`); once. Called by the verbs that run Ray Data, before
    their progress bar takes the console."""
    if _quiet["wanted"] and not _quiet["done"]:
        _filter_native_stderr(RAY_FALSE_ALARMS)
        _quiet["done"] = True


def _filter_native_stderr(drop: tuple[str, ...]) -> None:
    """From now on what native code (Ray's C++ core worker) writes to this process's stderr, file descriptor
    2, passes through a small child process that drops the lines holding one of ``drop`` and passes the rest
    on to the real stderr. ``sys.stderr`` (the progress bar, Rich's console) moves to a copy of the real stderr,
    so it keeps its terminal; a logging handler made before writes through the filter. The child ends once
    every writer is gone: this process (also after kill -9 or a crash, passing on what was written before)
    and any process it started with this stderr (Ray's own processes write to their log files)."""
    sys.stderr.flush()
    real = os.dup(2)
    read, write = os.pipe()
    subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER, *drop], stdin=read, stdout=real,
                     stderr=subprocess.DEVNULL, close_fds=True)
    os.close(read)
    os.dup2(write, 2)
    os.close(write)
    sys.stderr = open(real, "w", buffering=1, encoding=sys.stderr.encoding, errors=sys.stderr.errors)


# Ray's own bookkeeping that a local instance without a dashboard keeps for nobody: metrics, the event loops'
# statistics and task events (what the dashboard, `ray list tasks` and `ray timeline` read). On 2 cores, beside two
# engine actors, they took about 1.5 of the 10 CPU-seconds Ray's processes used in a 2-minute run (docs/measurements.md)
QUIET_RAY_CONFIG = {"enable_metrics_collection": False, "event_stats": False, "task_events_report_interval_ms": 0}
# Ray's notice, printed on the driver's console as a "(raylet)" line, that a task failed and will be retried. A run
# whose output is its progress bar (worker_logs=False) ends its map actors with tasks in flight when its budget stops
# it (Ray Data kills the pool when the loop leaves it), and each prints "Task MapWorker(...) failed ... killed by
# `ray.kill`"; an engine actor that Ray restarts retries its batch and the run says what it redid. Read by the
# driver's core worker from its environment (set before ray.init) and by the processes of a local instance.
RETRY_NOTICE_ENV = "RAY_enable_output_error_log_if_still_retry"


def start_ray(address: str | None = None, num_cpus: int | None = None, worker_niceness: int | None = None,
              worker_logs: bool = True, metrics: bool = True) -> bool:
    """Join the Ray cluster at ``address`` ('auto': the running one; none given: ``$RAY_ADDRESS`` where set), or
    start a new local instance (``num_cpus``; ``worker_niceness``: None keeps Ray's own default); nothing when this process
    already runs Ray. ``worker_logs``: False keeps workers' output off the driver's console and Ray's
    own logging at WARNING (a run's progress bar), and a local instance then runs no log monitor (the process that
    forwards workers' output to drivers; their log files are still written); True leaves llmrec's logging
    configuration alone. ``metrics``: False starts a local instance without Ray's metrics, event-loop statistics
    and task events (:data:`QUIET_RAY_CONFIG`). A cluster joined keeps its own settings.
    Returns True when this call started or joined Ray (the caller then owns ``ray.shutdown``)."""
    import ray

    if ray.is_initialized():
        return False
    # No address: a new local instance ("local"), never a local instance another process started (ray.init()
    # would join the one recorded in /tmp/ray, e.g. a run or test beside this one, and then refuse num_cpus);
    # $RAY_ADDRESS, where set (a Ray job's driver), is the user's choice and joined.
    local = not address and not settings.env_ray_address()
    kwargs: dict = {"address": address or ("local" if local else None), "ignore_reinit_error": True}
    if worker_logs:
        kwargs["configure_logging"] = False
    else:
        kwargs.update(log_to_driver=False, logging_level=logging.WARNING)
        os.environ.setdefault(RETRY_NOTICE_ENV, "0")
    if local:  # this process starts its raylet, so these apply
        kwargs["include_dashboard"] = False
        kwargs["_node_ip_address"] = listen_address()
        if num_cpus:
            kwargs["num_cpus"] = num_cpus
        system = {} if metrics else dict(QUIET_RAY_CONFIG)
        if worker_niceness is not None:
            system["worker_niceness"] = worker_niceness
        if system:
            kwargs["_system_config"] = system
        reap_local_sessions()
        mark = f"{os.getpid()}-{os.urandom(4).hex()}"
        os.environ[OWNER_ENV] = mark  # for the processes ray.init starts, not for those this process starts later
    else:
        check_reachable(address)
    try:
        ray.init(**kwargs)
    except Exception as e:  # noqa: BLE001 - whatever Ray raises: one line that says what to do, Ray's chained
        raise _start_failed(e, address, local) from e
    finally:
        os.environ.pop(OWNER_ENV, None)
    if local:
        if not worker_logs:
            _stop_log_monitor()
        _start_watchdog(mark, record_local_session(mark))
    log.info("Ray ready: %s", ray.cluster_resources())
    return True


GCS_PROBE_TIMEOUT_S = 5.0  # how long a cluster's address may take to accept a connection before the run gives up


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address to probe (``host:port``, ``ray://host:port``; Ray's GCS port 6379 when none
    is given); None for what names no one address (``auto``, ``local``, a dashboard ``http(s)://`` URL)."""
    from urllib.parse import urlsplit

    text = address.strip()
    if text.lower() in ("auto", "local", "") or ("://" in text and not text.lower().startswith("ray://")):
        return None
    try:
        parts = urlsplit(text if "://" in text else f"ray://{text}")
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, port or 6379) if parts.hostname else None


def check_reachable(address: str | None, timeout_s: float = GCS_PROBE_TIMEOUT_S) -> None:
    """Before joining the Ray cluster at ``address`` (else ``$RAY_ADDRESS``): something must accept a connection
    there within ``timeout_s``. Ray itself retries an address where nothing listens without end (``Failed to connect
    to GCS at …``), so a mistyped ``ray.address`` would hang the run."""
    import socket

    given = address or settings.env_ray_address()
    target = _host_port(given) if given else None
    if target is None:
        return
    name = "ray.address" if address else "$RAY_ADDRESS"
    try:
        socket.create_connection(target, timeout=timeout_s).close()
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise ConfigError(f"{name} {given}: no Ray cluster answers at {target[0]}:{target[1]} ({why}, after "
                          f"{timeout_s:g} s at most); start its head there (`ray start --head --port {target[1]}`), "
                          f"fix the address, or unset {name} to start a local Ray instance") from e


def _start_failed(e: Exception, address: str | None, local: bool) -> Exception:
    """The one-line error for a ``ray.init`` that failed (Ray's exception is chained, not printed)."""
    said = " ".join(str(e).split())[:300] or type(e).__name__
    if not local:
        return ConfigError(f"cannot join the Ray cluster at {address or settings.env_ray_address() or 'auto'}: "
                           f"{said} (check ray.address / $RAY_ADDRESS and that the cluster runs)")
    if "timed out" in said.lower():
        cpus = os.cpu_count() or 1
        try:
            load = f"; load average {os.getloadavg()[0]:.1f} on {cpus} CPUs"
        except OSError:
            load = ""
        return RunFailed(f"a local Ray instance did not start in time ({said[:160]}{load}): the machine is too busy "
                         "to start Ray's processes; re-run when it is less loaded (finished samples are kept), or "
                         "join a running cluster with ray.address")
    return RunFailed(f"a local Ray instance could not start: {said} (Ray's logs: /tmp/ray/session_latest/logs)")


def _stop_log_monitor() -> None:
    """Stop the log monitor of the local instance this process just started. It reads every worker's log files
    ten times a second to forward new lines to drivers that asked for them; with ``log_to_driver=False`` none does
    (no dashboard runs either). ``ray.init`` has no switch for it (``ray start --include-log-monitor`` has);
    the node object it started has one to stop it, and a Ray without that keeps it running."""
    try:
        from ray._private import worker

        stop = worker._global_node.kill_log_monitor
    except (ImportError, AttributeError):
        log.debug("Ray's log monitor keeps running: this Ray has no node handle to stop it")
        return
    try:
        stop(check_alive=False)
    except Exception as e:  # noqa: BLE001 - a Ray that changed this private handle: the monitor keeps running
        log.debug("Ray's log monitor keeps running: %s", e)


def is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen_address() -> str:
    """The node address of a local instance (:func:`llmrec.settings.ray_host`). For the loopback, Ray is told
    that this is no cluster node: it would otherwise replace 127.0.0.1 by the machine's outward address (and
    listen there). The variable is also set for the processes Ray starts, which read it themselves."""
    host = settings.ray_host()
    if is_loopback(host):
        os.environ[RAY_CLUSTER_ENV] = "0"
        try:
            from ray._private import ray_constants
        except ImportError:  # a Ray without this switch: the variable, read by its processes, is all there is
            pass
        else:
            ray_constants.ENABLE_RAY_CLUSTER = False  # read once, when Ray was imported: set for this process too
        return settings.LOOPBACK if host == "localhost" else host
    return host


def _sessions_dir() -> Path:
    return settings.cache_root() / LOCAL_SESSIONS_DIR


def _stamps(procs) -> list[list]:
    """What identifies each process across pid reuse: [pid, start time] (those that ended are left out)."""
    import psutil

    out = []
    for proc in procs:
        try:
            out.append([proc.pid, proc.create_time()])
        except psutil.Error:
            continue
    return out


def _alive(stamp: list):
    """The process of ``stamp`` if it still runs (same pid, same start time), else None."""
    import psutil

    try:
        proc = psutil.Process(stamp[0])
        return proc if proc.create_time() == stamp[1] and proc.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None


def record_local_session(mark: str | None = None) -> dict:
    """Write down the local Ray instance this process just started: its own stamp, those of every process
    below it (GCS, raylet, the raylet's dashboard and runtime-env agents, ...) and the ``mark`` its processes
    carry (:data:`OWNER_ENV`; the workers the raylet starts later too). A normal exit removes the record
    (``ray.shutdown`` stops them); after a kill -9 the next start finds it (:func:`reap_local_sessions`).
    Returns the record."""
    import psutil

    me = psutil.Process()
    record = {"driver": _stamps([me])[0], "processes": _stamps(me.children(recursive=True)), "mark": mark}
    path = _sessions_dir() / f"{me.pid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    atexit.register(path.unlink, missing_ok=True)
    return record


def _start_watchdog(mark: str, record: dict) -> None:
    """A small process that outlives this one by a few seconds: once this process has ended, however it ended, it
    ends every process of the local instance still running (:func:`end_instance`). Ray ends its GCS and raylet
    with their driver, but a worker busy in native code (an engine's generation, a killed batch's threads) was seen
    still running an hour later with no raylet left. Its own session: a Ctrl-C or a signal to this process's group
    does not reach it. The pipe's writing end is this process's only: Ray's processes do not inherit it."""
    read, write = os.pipe()
    try:
        subprocess.Popen([sys.executable, "-P", "-c", _WATCHDOG, mark, json.dumps(record["processes"])], stdin=read,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                         start_new_session=True)
    except OSError as e:  # no process to spare: the next start still reaps what a killed run left
        log.debug("no watchdog for the local Ray instance: %s", e)
        os.close(write)
    else:
        _watchdog_pipes.append(write)  # open until this process ends
    finally:
        os.close(read)


_watchdog_pipes: list[int] = []


def _marked(mark: str) -> list:
    """This user's processes that carry ``mark`` in the environment they started with (:data:`OWNER_ENV`)."""
    import psutil

    needle, out = f"{OWNER_ENV}={mark}".encode(), []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    out.append(proc)
        except OSError:  # another user's, or ended meanwhile
            continue
    return out


def instance_processes(mark: str | None, stamps: list) -> list:
    """The processes of a local instance still running: the recorded ones (``stamps``) and those carrying its
    ``mark`` (not a zombie)."""
    import psutil

    found = {p.pid: p for p in (_alive(s) for s in stamps) if p is not None}
    for proc in _marked(mark) if mark else []:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.setdefault(proc.pid, proc)
        except psutil.Error:
            continue
    return list(found.values())


def end_instance(mark: str, stamps: str, grace_s: float = WATCHDOG_GRACE_S) -> list[int]:
    """After a driver ended: give its local instance's processes ``grace_s`` seconds to end on their own (a normal
    ``ray.shutdown`` ends them), then kill those left (SIGKILL: Ray's agents ignore SIGTERM). Returns their pids."""
    import time

    import psutil

    deadline, recorded = time.monotonic() + grace_s, json.loads(stamps)
    while (left := instance_processes(mark, recorded)) and time.monotonic() < deadline:
        time.sleep(0.25)
    killed = []
    for proc in left:
        try:
            proc.kill()
            killed.append(proc.pid)
        except psutil.Error:
            continue
    return killed


def reap_local_sessions() -> list[int]:
    """Before starting a local Ray instance: stop what is left of the instances earlier llmrec processes
    started and did not stop because they were killed (kill -9, OOM) and whose watchdog did not end them
    (:func:`_start_watchdog`). After its driver dies, Ray ends its GCS and raylet, but the raylet's DashboardAgent
    and RuntimeEnvAgent linger for a minute or more and ignore SIGTERM meanwhile, and a worker busy in native code
    may run on with no raylet, so the recorded processes and those carrying the instance's mark that still run are
    killed. Records of a driver that still
    runs are left alone, and so is every process llmrec did not record (a cluster it joined, another
    user's instance). Returns the pids killed."""
    import psutil

    killed: list[int] = []
    for path in sorted(_sessions_dir().glob("*.json")) if _sessions_dir().is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written, or not ours to read
        if _alive(record["driver"]) is not None:
            continue
        for proc in instance_processes(record.get("mark"), record["processes"]):
            try:
                proc.kill()
                killed.append(proc.pid)
            except psutil.Error:  # ended meanwhile, or not ours to stop
                continue
        path.unlink(missing_ok=True)
    if killed:
        log.warning("stopped %d Ray process(es) left by an llmrec run that was killed: pids %s", len(killed),
                    " ".join(map(str, killed)))
    return killed


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
