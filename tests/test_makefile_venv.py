"""The Makefile's checkout venv follows the package folder its pins name: `make venv` keeps a venv made over that
folder, and makes it anew when it was made over another one (a checkout moved to other pins), even where the
venv's stamp is newer than the folder's. `make -n` only prints what it would run; nothing is built."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tests.shipped import REPO

# `make` in a subprocess: the Makefile is the thing under test (a dry run, about a second)
pytestmark = [pytest.mark.slow, pytest.mark.integration,
              pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")]


def _stamp(path, text: str, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    t = time.time() - age_s
    os.utime(path, (t, t))


def _dry_run(venv, deps) -> str:
    out = subprocess.run(["make", "-n", "venv", f"VENV={venv}", f"DEPS={deps}"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_a_venv_made_over_other_pins_is_made_anew(tmp_path):
    deps, other, venv = tmp_path / "deps-a", tmp_path / "deps-b", tmp_path / "venv"
    _stamp(deps / ".installed", "", age_s=60)  # the package folder, built before the venv
    _stamp(other / ".installed", "", age_s=60)

    _stamp(venv / ".installed", f"{deps}\n", age_s=0)  # made over this folder: kept
    assert "Nothing to be done" in _dry_run(venv, deps)

    _stamp(venv / ".installed", f"{other}\n", age_s=0)  # made over another folder, its stamp newer: made anew
    assert f"rm -rf {venv}" in _dry_run(venv, deps)

    shutil.rmtree(other)  # ... also when that folder is gone
    assert f"rm -rf {venv}" in _dry_run(venv, deps)

    _stamp(venv / ".installed", "", age_s=0)  # a stamp that names no folder (an older Makefile's): made anew once
    assert f"rm -rf {venv}" in _dry_run(venv, deps)
