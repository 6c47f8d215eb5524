"""`llmrec submit` and `llmrec jobs list|status|logs|stop`: runs as Ray Jobs on a cluster.

Mounted by ``llmrec.cli`` through ``EXTRA_VERBS``. All talk to the cluster's dashboard
(``--address http://HEAD:8265``, default ``$RAY_ADDRESS``) through ``JobSubmissionClient``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llmrec import settings
from llmrec.errors import EXIT_FAILED, ConfigError, LlmrecError
from llmrec.redact import redact_text

console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)
jobs_app = typer.Typer(no_args_is_help=True,
                       help="Watch and control submitted runs (Ray Jobs): list, status, logs, stop.")

ADDRESS_HELP = ("Ray dashboard URL of the cluster, e.g. http://127.0.0.1:8265 (default: $RAY_ADDRESS). Credentials "
                "in it are never printed: prefer the cluster's token (RAY_AUTH_MODE=token, ~/.ray/auth_token).")
SET_HELP = "Override a config key before resolving, e.g. --set benchmark.limit=20. Repeatable."
ENV_HELP = ("NAME of a variable the job needs (checked on the cluster, value never sent), "
            "e.g. --env OPENAI_API_KEY. Repeatable.")
CODE_HELP = "ship: send this checkout's llmrec package with the job; installed: use the cluster's own llmrec (image)."
DEPS_HELP = ("cluster: dependencies are installed on the nodes (image); "
             "pip: install llmrec's pinned requirements per job.")
DRY_HELP = "Print the job spec (entrypoint, runtime_env) and the resolved config; submit nothing."
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
LOG_TAIL_LINES = 30


def client(address: str | None):
    from ray.job_submission import JobSubmissionClient

    address = address or settings.env_ray_address()
    if not address:
        raise ConfigError("no cluster address: pass --address http://HEAD:8265 or set RAY_ADDRESS")
    from ray.exceptions import AuthenticationError

    try:
        return JobSubmissionClient(address)
    except AuthenticationError as e:
        raise ConfigError(f"the cluster at {redact_text(address)} wants its token: export RAY_AUTH_MODE=token and put the "
                          "token (`ray get-auth-token` on the head) in ~/.ray/auth_token or $RAY_AUTH_TOKEN") from e
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigError(f"cannot reach the Ray Jobs API at {redact_text(address)}: {redact_text(str(e))} "
                          "(is the head up, started with the dashboard, and is this its dashboard port?)") from e


@contextmanager
def _job_errors(job_id: str):
    """The Jobs client raises RuntimeError for an unknown job or a refused request: an LlmrecError here."""
    try:
        yield
    except RuntimeError as e:
        raise LlmrecError(f"job {job_id}: {redact_text(str(e))}") from e


def wait_for(c, job_id: str, poll_s: float = 2.0) -> str:
    while True:
        status = str(c.get_job_status(job_id).value)
        if status in TERMINAL:
            return status
        time.sleep(poll_s)


def follow_logs(c, job_id: str) -> str:
    """Print the job's log as it grows; returns the final status."""
    async def tail() -> None:
        async for chunk in c.tail_job_logs(job_id):
            sys.stdout.write(chunk)
            sys.stdout.flush()

    asyncio.run(tail())
    return wait_for(c, job_id, poll_s=0.5)


def print_log_tail(c, job_id: str, lines: int = LOG_TAIL_LINES) -> None:
    """The last lines of a job's log (where a failed job says why), on stderr."""
    try:
        text = c.get_job_logs(job_id)
    except RuntimeError as e:  # the Jobs API answered with an error: say so, the status is still known
        err.print(f"(no log: {e})", markup=False, highlight=False)
        return
    tail = text.rstrip("\n").splitlines()[-lines:]
    err.print(f"last {len(tail)} lines of the job's log (all of it: llmrec jobs logs {job_id}):",
              markup=False, highlight=False)
    err.print("\n".join(tail), markup=False, highlight=False)


def _exit_for(status: str, c=None, job_id: str | None = None) -> None:
    """Print the final status (and, for a failed job whose log was not followed, its log's tail); exit."""
    color = "green" if status == "SUCCEEDED" else "red"
    if status == "FAILED" and c is not None:
        print_log_tail(c, job_id)
    console.print(f"job finished: [{color}]{status}[/]")
    raise typer.Exit(0 if status == "SUCCEEDED" else EXIT_FAILED)


def submit(
    config: Path = typer.Argument(..., help="Run config YAML, as for `llmrec run`, or a suite config (it has "
                                            "`subjects:`), run as `llmrec suite` (see configs/)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
    env: list[str] = typer.Option([], "--env", help=ENV_HELP),
    code: str = typer.Option("ship", help=CODE_HELP),
    deps: str = typer.Option("cluster", help=DEPS_HELP),
    wait: bool = typer.Option(False, "--wait", help="Block until the job ends; exit 0 only if it SUCCEEDED."),
    follow: bool = typer.Option(False, "--follow", help="Stream the job's log until it ends (implies --wait)."),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_HELP),
    agent_wait: float = typer.Option(60.0, "--agent-wait", min=0,
                                     help="Seconds to wait for the head's job agent when the cluster has none up yet "
                                          "(a head just started)."),
) -> None:
    """Submit a run to a Ray cluster as a Ray Job (see docs/cluster.md).

    The config is resolved here: overrides applied, validated, relative paths made absolute, the tracking URI fixed.

    It travels with the job as its resolved config and the job runs `llmrec run` on it.

    Secrets are never sent: name them with --env (or engine.api_key_env) and set them on the cluster nodes.
    A URL in the config carrying credentials (https://user:pass@host, ?api_key=..., ?token=...) is refused.

    Example: llmrec submit configs/prefeval_mcq_demo.yaml --address http://127.0.0.1:8265
    --set tracking.uri=http://127.0.0.1:5000 --follow
    """
    from llmrec.cluster.jobs import RESOLVED, build_job, submit_when_ready

    with tempfile.TemporaryDirectory(prefix="llmrec-submit-") as tmp:
        spec = build_job(config, Path(tmp), set_, env, code=code, deps=deps)
        if dry_run:
            console.print_json(data=spec.submit_kwargs())
            console.print((Path(tmp) / "job" / RESOLVED).read_text(), markup=False, highlight=False)
            return
        c = client(address)
        with _job_errors(spec.submission_id):
            # uploads the staged files before returning; waits (bounded) for the job agent of a head just started
            job_id = submit_when_ready(c, spec, agent_wait, say=lambda m: err.print(m, markup=False, highlight=False))
    console.print(f"submitted [bold]{job_id}[/]  (results: {escape(spec.metadata['llmrec.output_dir'])}, "
                  f"MLflow: {spec.metadata['llmrec.tracking_uri']})")
    console.print(f"watch: llmrec jobs logs {job_id} --follow    stop: llmrec jobs stop {job_id}")
    if follow:
        _exit_for(follow_logs(c, job_id))
    elif wait:
        _exit_for(wait_for(c, job_id), c, job_id)


def _when(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") if ms else "-"


@jobs_app.command("list")
def list_jobs(address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
              all_: bool = typer.Option(False, "--all", help="Also jobs not submitted by llmrec.")) -> None:
    """Jobs on the cluster, newest first: id, status, benchmark, start/end time.

    Example: llmrec jobs list --address http://127.0.0.1:8265
    """
    found = client(address).list_jobs()
    table = Table(title="jobs")
    for col in ("submission id", "status", "benchmark", "started", "ended"):
        table.add_column(col)
    for j in sorted(found, key=lambda j: j.start_time or 0, reverse=True):
        meta = j.metadata or {}
        if not all_ and "llmrec.benchmark" not in meta:
            continue
        table.add_row(j.submission_id or j.job_id or "-", str(j.status.value), meta.get("llmrec.benchmark", "-"),
                      _when(j.start_time), _when(j.end_time))
    console.print(table)


@jobs_app.command("status")
def status(job_id: str = typer.Argument(..., help="Submission id (from `llmrec submit` or `llmrec jobs list`)."),
           address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP)) -> None:
    """Status, message, config, output folder and MLflow store of one job.

    Example: llmrec jobs status llmrec-prefeval-20260101-120000-ab12
    """
    with _job_errors(job_id):
        info = client(address).get_job_info(job_id)
    console.print(f"{escape(job_id)}: [bold]{info.status.value}[/]  {escape(info.message or '')}")
    for k, v in sorted((info.metadata or {}).items()):
        console.print(f"  {k}: {v}", markup=False, highlight=False)
    console.print(f"  entrypoint: {info.entrypoint}", markup=False, highlight=False)


@jobs_app.command("logs")
def logs(job_id: str = typer.Argument(..., help="Submission id."),
         address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
         follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends.")) -> None:
    """The job's driver log (the `llmrec run` output). --follow tails it until the job ends.

    Example: llmrec jobs logs llmrec-prefeval-20260101-120000-ab12 --follow
    """
    c = client(address)
    with _job_errors(job_id):
        final = follow_logs(c, job_id) if follow else None
        if final is None:
            sys.stdout.write(c.get_job_logs(job_id))
    if final is not None:
        _exit_for(final)


@jobs_app.command("stop")
def stop(job_id: str = typer.Argument(..., help="Submission id."),
         address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP)) -> None:
    """Stop a running job (its finished samples stay in the result store; re-submitting resumes).

    Example: llmrec jobs stop llmrec-prefeval-20260101-120000-ab12
    """
    with _job_errors(job_id):
        stopped = client(address).stop_job(job_id)
    console.print(f"{job_id}: {'stop requested' if stopped else 'already finished'}")


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)
    app.add_typer(jobs_app, name="jobs")
