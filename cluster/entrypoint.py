"""The command a submitted job runs on the cluster: check the environment, then ``llmrec run`` (``--verb suite``:
``llmrec suite``).

``python -m llmrec.cluster.entrypoint <resolved config> --requirements requirements.txt --require-env NAME ...``.

1. llmrec's dependencies (the pinned list shipped with the job) are checked first, with the standard
   library only: a cluster whose Python lacks them fails at once, naming the missing packages and
   the fix, instead of failing later with an ``ImportError`` deep in the run.
2. Variables are checked by name only (their values are never printed); a missing one fails the
   job before any work, naming it and where it must be set.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from importlib import metadata
from pathlib import Path


def missing_packages(requirements: list[str]) -> list[str]:
    """The requirements (``name[extras]==version``) whose distribution is not installed in this Python."""
    missing = []
    for req in requirements:
        name = re.split(r"[\[<>=!~;\s]", req.strip(), maxsplit=1)[0]
        if not name:
            continue
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(req.strip())
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llmrec.cluster.entrypoint")
    parser.add_argument("config", help="resolved run config (written by `llmrec submit`)")
    parser.add_argument("--requirements", help="llmrec's pinned dependencies, one a line (written by `llmrec submit`)")
    parser.add_argument("--require-env", action="append", default=[], help="variable that must be set")
    parser.add_argument("--verb", choices=("run", "suite"), default="run", help="llmrec verb the config is for")
    args = parser.parse_args(argv)
    if args.requirements:
        missing = missing_packages(Path(args.requirements).read_text(encoding="utf-8").splitlines())
        if missing:
            sys.stderr.write(
                f"error: this cluster's Python ({sys.executable}) lacks {len(missing)} of llmrec's dependencies: "
                f"{' '.join(missing)}\nfix: run the cluster from the llmrec image (cluster/Dockerfile, "
                "docs/cluster.md), or submit with `--deps pip` (runtime_env pip: Ray installs them per job)\n")
            return 2
    from llmrec import settings

    missing = settings.missing_env(args.require_env)
    if missing:
        sys.stderr.write(f"error: the job needs {', '.join(missing)} set on the cluster nodes (where `ray start` "
                         "runs, e.g. from a Kubernetes Secret); values are never sent with a job\n")
        return 2
    import llmrec

    sys.stderr.write(f"llmrec package: {os.path.dirname(llmrec.__file__)}\n")  # which code the job runs
    sys.stderr.flush()
    # exec, not import: the run is exactly `llmrec run` (or `llmrec suite`), with its exit code and progress output
    os.execv(sys.executable, [sys.executable, "-m", "llmrec.cli", args.verb, args.config])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
