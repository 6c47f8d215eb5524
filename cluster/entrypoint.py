"""The command a submitted job runs on the cluster: check the named variables, then ``llmrec run``.

``python -m llmrec.cluster.entrypoint resolved.yaml --require-env NAME ...``. Variables are checked
by name only (their values are never printed); a missing one fails the job before any work, naming
it and where it must be set.
"""

from __future__ import annotations

import argparse
import os
import sys

from llmrec import settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llmrec.cluster.entrypoint")
    parser.add_argument("config", help="resolved run config (written by `llmrec submit`)")
    parser.add_argument("--require-env", action="append", default=[], help="variable that must be set")
    args = parser.parse_args(argv)
    missing = settings.missing_env(args.require_env)
    if missing:
        sys.stderr.write(f"error: the job needs {', '.join(missing)} set on the cluster nodes (where `ray start` "
                         "runs, e.g. from a Kubernetes Secret); values are never sent with a job\n")
        return 2
    import llmrec

    sys.stderr.write(f"llmrec package: {os.path.dirname(llmrec.__file__)}\n")  # which code the job runs
    sys.stderr.flush()
    # exec, not import: the run is exactly `llmrec run`, with its exit code and progress output
    os.execv(sys.executable, [sys.executable, "-m", "llmrec.cli", "run", args.config])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
