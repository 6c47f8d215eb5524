"""Turn a run config (or a suite config, run as ``llmrec suite``) into a Ray Job: the staged files, the
``runtime_env`` and the entrypoint.

What a submitted job carries (built in a staging folder on the submitting machine):

- ``working_dir``: the staging folder, holding the resolved config (``RESOLVED``; see ``cluster/resolve.py``),
  a copy of every local file a benchmark section names (a prompt template: ``SHIPPED/``, the config then names the
  copy; the cluster has no copy of the submitter's files) and ``requirements.txt`` (llmrec's pinned dependencies, which the entrypoint checks on the cluster
  before anything imports them) and no code, so the job's current directory cannot shadow the
  ``llmrec`` package;
- ``py_modules``: the ``llmrec`` package assembled from this checkout by setuptools (``build_py``
  applies the ``package_dir`` mapping), so the cluster runs exactly the submitter's code
  (``code="ship"``); with ``code="installed"`` nothing is shipped and the cluster's own install
  (the image built from ``cluster/Dockerfile``) is used;
- ``pip`` (``deps="pip"`` only): llmrec's pinned requirements, for clusters whose image lacks them;
- ``env_vars``: never secrets. Variables the job needs (``--env NAME``, plus every ``*_env`` name
  in the config) are checked by name on the cluster by the entrypoint, which fails before any work
  when one is unset. Their values come from the cluster nodes' environment (set where ``ray start``
  runs: a Kubernetes Secret, the cluster launcher's ``setup_commands``, a secret manager).
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

from llmrec import settings, tracking
from llmrec.errors import ConfigError, RunFailed
from llmrec.rundir import RunDir
from llmrec.cluster.resolve import dump, env_names_in, resolve_for_cluster, resolve_suite_for_cluster

RESOLVED = RunDir.CONFIG  # the staged config: the name a run directory gives its config
REQUIREMENTS = "requirements.txt"
ENTRY_MODULE = "llmrec.cluster.entrypoint"
SHIPPED = "files"  # in the job's working directory: the local files the benchmark sections name
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CODE_MODES = ("ship", "installed")
DEPS_MODES = ("cluster", "pip")


@dataclass
class JobSpec:
    """Everything passed to ``JobSubmissionClient.submit_job`` (and nothing secret)."""

    submission_id: str
    entrypoint: str
    runtime_env: dict
    metadata: dict[str, str] = field(default_factory=dict)

    def submit_kwargs(self) -> dict:
        return {"submission_id": self.submission_id, "entrypoint": self.entrypoint,
                "runtime_env": self.runtime_env, "metadata": self.metadata}


def source_root() -> Path | None:
    """The checkout llmrec is installed from (editable install), or None for a plain install."""
    import llmrec

    root = Path(llmrec.__file__).resolve().parents[1]
    return root if (root / "setup.py").is_file() and (root / "pipelines").is_dir() else None


def stage_package(dest: Path) -> Path:
    """``llmrec`` as an importable folder under ``dest``, built from the checkout by setuptools."""
    root = source_root()
    if root is None:
        raise ConfigError("--code ship needs llmrec installed from a source checkout (pip install -e .); "
                          "with a packaged install use --code installed and a cluster image holding llmrec")
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(dest)], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"building the llmrec package from {root} failed:\n{proc.stderr[-2000:]}")
    return dest / "llmrec"


def pinned_requirements() -> list[str]:
    """llmrec's own pinned dependencies (no extras), as installed here."""
    reqs = metadata.requires("llmrec") or []
    return [r.split(";")[0].strip() for r in reqs if "extra ==" not in r]


def git_commit() -> str:
    root = source_root()
    return tracking.git_commit(root) if root is not None else "unknown"


def submission_id(raw: dict) -> str:
    name = raw["name"] if "subjects" in raw else raw["output"].get("run_name") or raw["benchmark"]["name"]
    slug = re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")[:40]
    return f"llmrec-{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def ship_local_files(sections: list[dict], work: Path) -> list[str]:
    """Copy every local file a benchmark section names (its paths are absolute once resolved: a prompt template,
    wherever it lies) into ``work/SHIPPED`` and point the section at the copy, a path relative to the job's working
    directory (where the job runs). Returns the keys rewritten."""
    import shutil

    done: list[str] = []
    copies: dict[str, str] = {}

    def walk(node, key: str):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            where = f"{key}.{k}" if isinstance(node, dict) else f"{key}[{k}]"
            if isinstance(v, (dict, list)):
                walk(v, where)
            elif isinstance(v, str) and "://" not in v and Path(v).is_absolute() and Path(v).is_file():
                if v not in copies:
                    copies[v] = f"{SHIPPED}/{len(copies)}-{Path(v).name}"
                    (work / SHIPPED).mkdir(exist_ok=True)
                    shutil.copyfile(v, work / copies[v])
                node[k] = copies[v]
                done.append(where)

    for i, section in enumerate(sections):
        walk(section, "benchmark" if len(sections) == 1 else f"benchmarks[{i}].benchmark")
    return done


def check_env_names(names: list[str]) -> list[str]:
    bad = [n for n in names if not ENV_NAME.match(n)]
    if bad:
        raise ConfigError(f"--env takes variable NAMES, never values: {', '.join(bad)} "
                          "(e.g. --env OPENAI_API_KEY; the value must be set on the cluster nodes)")
    return sorted(set(names))


def build_job(config: str | Path, stage_dir: Path, overrides: list[str] | None = None,
              env: list[str] | None = None, code: str = "ship", deps: str = "cluster") -> JobSpec:
    """Resolve ``config``, write the staged files into ``stage_dir`` and describe the Ray Job."""
    if code not in CODE_MODES or deps not in DEPS_MODES:
        raise ConfigError(f"code must be one of {CODE_MODES} (got {code!r}); deps one of {DEPS_MODES} (got {deps!r})")
    from llmrec.config import read_yaml
    from llmrec.pipelines.runner.suite_config import is_suite_file

    suite = is_suite_file(read_yaml(config))  # a suite runs as `llmrec suite`, a run config as `llmrec run`
    raw = resolve_suite_for_cluster(config, overrides) if suite else resolve_for_cluster(config, overrides)
    names = check_env_names(list(env or []) + env_names_in(raw))
    work = stage_dir / "job"
    work.mkdir(parents=True, exist_ok=True)
    sections = [e["benchmark"] for e in raw["benchmarks"]] if suite else [raw["benchmark"]]
    ship_local_files(sections, work)
    (work / RESOLVED).write_text(dump(raw), encoding="utf-8")
    (work / REQUIREMENTS).write_text("".join(f"{r}\n" for r in pinned_requirements()), encoding="utf-8")
    runtime_env: dict = {"working_dir": str(work), "env_vars": {"PYTHONUNBUFFERED": "1"}}
    if code == "ship":
        runtime_env["py_modules"] = [str(stage_package(stage_dir / "code"))]
        runtime_env["env_vars"][settings.GIT_COMMIT_ENV] = git_commit()  # the shipped copy has no .git
    if deps == "pip":
        runtime_env["pip"] = pinned_requirements()
    entry = f"python -m {ENTRY_MODULE} {RESOLVED} --requirements {REQUIREMENTS}" + (" --verb suite" if suite else "")
    entry += "".join(f" --require-env {n}" for n in names)
    what = f"suite {raw['name']}" if suite else str(raw["benchmark"]["name"])
    meta = {"llmrec.config": str(config), "llmrec.benchmark": what,
            "llmrec.output_dir": str(raw["output"]["dir"]), "llmrec.tracking_uri": str(raw["tracking"]["uri"]),
            "llmrec.git_commit": git_commit(), "llmrec.code": code, "llmrec.require_env": ",".join(names)}
    return JobSpec(submission_id(raw), entry, runtime_env, meta)


# What Ray's Jobs API answers while the head's job agent (the dashboard agent, which runs a job's driver) is not up:
# the dashboard itself answers before it, for about half a minute after `ray start --head`
AGENT_NOT_READY = "No available agent to submit job"
AGENT_WAIT_S = 60.0


def submit_when_ready(c, spec: JobSpec, wait_s: float = AGENT_WAIT_S, say: Callable[[str], None] = print,
                      clock: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None,
                      poll_s: float = 2.0) -> str:
    """``c.submit_job`` for ``spec``; while the head answers that it has no job agent yet (a head just started),
    ask again for up to ``wait_s`` seconds, saying so once (``say``). Any other refusal is raised as it is
    (RuntimeError, the Jobs client's). Returns the submission id. Raises ``RunFailed`` naming what to check when the
    agent is not up in time. Asking again is safe: a refused submission created no job, so its id is still free."""
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    t0, said = clock(), False
    while True:
        try:
            return c.submit_job(**spec.submit_kwargs())
        except RuntimeError as e:
            if AGENT_NOT_READY not in str(e):
                raise
            waited = clock() - t0
            if waited >= wait_s:
                raise RunFailed(
                    f"the cluster's head has no job agent after {waited:.0f} s (Ray's dashboard agent on the head runs "
                    "submitted jobs; it answered: no available agent to submit job). A head just started needs up "
                    "to a minute: re-run `llmrec submit` (--agent-wait <seconds> to wait longer). If it keeps "
                    "failing, the agent did not start: check `ray status` on the head and dashboard_agent.log in "
                    "its session's logs folder (/tmp/ray/session_latest/logs by default, or under --temp-dir)") \
                    from None
            if not said:
                say(f"waiting for the head's job agent (Ray's dashboard agent) to come up, up to {wait_s:.0f} s ...")
                said = True
            sleep(min(poll_s, max(0.0, wait_s - waited)))
