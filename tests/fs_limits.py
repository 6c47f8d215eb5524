"""Real full and read-only file systems for tests: a small tmpfs mounted in a private mount namespace
(``unshare``; as root, or as a user through a user namespace), in which a Python snippet runs. Nothing is
mounted outside the child process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _unshare() -> list[str]:
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux `unshare` (a private mount namespace for a small tmpfs)")
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
    return ["unshare", *flags]


def run_on_small_fs(mount: Path, code: str, size_kb: int = 512, read_only: bool = False, fill: bool = False,
                    env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -c code`` with a ``size_kb`` tmpfs at ``mount`` (``fill``: filled to the last byte first;
    ``read_only``: mounted read-only). Returns the finished process (text output)."""
    mount.mkdir(parents=True, exist_ok=True)
    opts = f"size={size_kb}k" + (",ro" if read_only else "")
    prep = f"mount -t tmpfs -o {opts} llmrec-test {mount}"
    if fill:
        prep += f" && (dd if=/dev/zero of={mount}/filler bs=4k 2>/dev/null || true)"
    script = f"{prep} && exec \"$0\" -c \"$1\""
    return subprocess.run([*_unshare(), "sh", "-c", script, sys.executable, code], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})
