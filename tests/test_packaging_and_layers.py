"""One namespace and the layer rules.

- ``pip wheel .`` holds one top-level package, ``llmrec`` (the checkout's folders map onto
  ``llmrec.pipelines``, ``llmrec.serving``, …); installed into a fresh venv it runs
  ``llmrec --help`` and ``llmrec list`` from a directory outside the checkout (slow: builds the wheel).
- The import contracts in pyproject.toml (``[tool.importlinter]``) hold; a module that breaks
  one makes ``lint-imports`` fail naming the offending import. These run in the fast tier, over
  the checkout's modules laid out as installed (setup.py's ``package_dir``), without a wheel.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(REPO)], check=True, cwd=out, capture_output=True)
    for leftover in (REPO / "build",):
        shutil.rmtree(leftover, ignore_errors=True)
    [whl] = out.glob("llmrec-*.whl")
    return whl


def _folders() -> tuple[str, ...]:
    """setup.py's FOLDERS (the folders that install as ``llmrec.<folder>``), read without running it."""
    tree = ast.parse((REPO / "setup.py").read_text())
    return next(ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "FOLDERS")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The checkout's modules as installed (``llmrec/`` and ``llmrec/<folder>/``): what lint-imports reads."""
    target = tmp_path_factory.mktemp("site")
    only_py = shutil.ignore_patterns("__pycache__", "*.pyc", "templates", "*.json", "*.md", "*.txt", "*.yaml")
    shutil.copytree(REPO / "llmrec", target / "llmrec", ignore=only_py)
    for folder in _folders():
        shutil.copytree(REPO / folder, target / "llmrec" / folder, ignore=only_py)
    return target


@pytest.mark.slow
@pytest.mark.integration
def test_wheel_holds_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"llmrec"}
    for sub in ("pipelines/runner", "pipelines/results", "pipelines/results/templates",
                "pipelines/benchmarks/prefeval/templates", "serving/engines", "models", "tuning",
                "cluster"):
        assert any(n.startswith(f"llmrec/{sub}/") for n in names), sub


def test_build_prints_no_setuptools_warnings(tmp_path):
    """A fresh install's output has no setuptools warnings: data folders (templates/, cluster/kuberay/) are
    listed packages, the license is an SPDX string."""
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, check=True)
    warned = [ln for ln in proc.stderr.splitlines() if "Warning" in ln]
    assert not warned, warned
    assert (tmp_path / "llmrec/pipelines/benchmarks/prefeval/templates/cot.txt").is_file()
    assert (tmp_path / "llmrec/pipelines/results/templates/report.html").is_file()  # `llmrec report`'s page


@pytest.mark.slow
@pytest.mark.integration
def test_fresh_venv_runs_the_cli_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site_dir = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
    # dependencies come from the test's own environment (a .pth adds its site-packages folders as plain paths, so
    # its editable-install hook does not run; a checkout's venv reaches the shared packages through a second
    # folder, the Makefile's $(VENV_CACHE)); llmrec itself only from the wheel
    own = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")] or [sysconfig.get_paths()["purelib"]]
    (site_dir / "deps.pth").write_text("".join(f"{p}\n" for p in own))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    where = subprocess.run([str(py), "-c", "import llmrec.pipelines as p; print(p.__file__)"], cwd=outside,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site_dir)), where
    helped = subprocess.run([str(venv / "bin" / "llmrec"), "--help"], cwd=outside, env=env, capture_output=True,
                            text=True)
    assert helped.returncode == 0 and "run" in helped.stdout and "score" in helped.stdout, helped.stderr
    listed = subprocess.run([str(venv / "bin" / "llmrec"), "list"], cwd=outside, env=env, capture_output=True,
                            text=True)
    assert listed.returncode == 0, listed.stderr
    assert "prefeval" in listed.stdout and "llamacpp" in listed.stdout


def lint(site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), str(REPO / "pyproject.toml"),
                           "--no-cache"], cwd=site, env={**os.environ, "PYTHONPATH": str(site)},
                          capture_output=True, text=True)


def test_layer_contracts_hold(site):
    res = lint(site)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


def test_a_broken_contract_fails_naming_the_import(site, tmp_path):
    bad = tmp_path / "site"
    shutil.copytree(site, bad)
    (bad / "llmrec" / "pipelines" / "benchmarks" / "prefeval" / "sneaky.py").write_text(
        "from llmrec.pipelines.runner.store_like import x\nimport ray\n")
    (bad / "llmrec" / "pipelines" / "runner" / "store_like.py").write_text("x = 1\n")
    res = lint(bad)
    assert res.returncode != 0
    assert "BROKEN" in res.stdout and "llmrec.pipelines.benchmarks.prefeval.sneaky -> ray" in res.stdout
    flat = " ".join(res.stdout.split())  # long import lines wrap in the report
    assert "not allowed to import llmrec.pipelines.runner" in flat
    assert "sneaky -> llmrec.pipelines.runner.store_like" in flat, res.stdout[-3000:]


def _runner_module_breaks(site, tmp_path, source: str) -> str:
    """The import-linter report (whitespace folded) of the installed tree with a runner module of ``source``
    added, which must break a contract."""
    bad = tmp_path / "site"
    shutil.copytree(site, bad)
    (bad / "llmrec" / "pipelines" / "runner" / "sneaky.py").write_text(source)
    res = lint(bad)
    assert res.returncode != 0 and "BROKEN" in res.stdout, res.stdout[-3000:]
    return " ".join(res.stdout.split())


def test_the_runner_may_not_import_an_engine_or_vllm(site, tmp_path):
    flat = _runner_module_breaks(site, tmp_path,
                                 "def f():\n    from llmrec.serving.engines.vllm import planning\n    import vllm\n")
    assert "the runner imports no engine" in flat and "BROKEN" in flat
    assert "llmrec.pipelines.runner.sneaky -> llmrec.serving.engines.vllm.planning" in flat, flat[-3000:]
    assert "llmrec.pipelines.runner.sneaky -> vllm" in flat, flat[-3000:]


def test_the_write_path_may_not_import_the_results_room(site, tmp_path):
    """The read verbs (``llmrec.pipelines.results``) sit above the runner: a runner module that imports one of
    them breaks the contract, naming the import."""
    flat = _runner_module_breaks(site, tmp_path, "from llmrec.pipelines.results.stored import open_runs\n")
    assert "the write path does not import the results room" in flat and "BROKEN" in flat
    assert "llmrec.pipelines.runner.sneaky -> llmrec.pipelines.results.stored" in flat, flat[-3000:]


def test_an_engine_may_not_import_another_engine(site, tmp_path):
    """Engines share code through modules no engine owns (chat formats, the embedded model); the vllm
    package's own modules may import each other."""
    bad = tmp_path / "site"
    shutil.copytree(site, bad)
    (bad / "llmrec" / "serving" / "engines" / "sneaky.py").write_text(
        "from llmrec.serving.engines.llamacpp import LlamaCppEngine\n")
    res = lint(bad)
    assert res.returncode != 0
    flat = " ".join(res.stdout.split())
    assert "no engine imports another engine" in flat and "BROKEN" in flat
    assert "llmrec.serving.engines.sneaky -> llmrec.serving.engines.llamacpp" in flat, res.stdout[-3000:]


def test_only_the_run_directory_type_names_its_files():
    """The config and metrics file names of a run directory are written in one module (``llmrec/rundir.py``:
    ``RunDir.CONFIG``, ``RunDir.METRICS``); every other module (code, docstrings, help texts, templates) goes
    through those constants, so a verb cannot read a run directory its own way."""
    names = ("resolved" + ".yaml", "metrics" + ".json")  # spelled apart: this file is a test, but keep it greppable
    found = []
    for folder in ("llmrec", *_folders()):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix not in (".py", ".html") or "__pycache__" in path.parts or path == REPO / "llmrec/rundir.py":
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{path.relative_to(REPO)}:{i}: {line.strip()}" for n in names if n in line]
    assert not found, "run-directory file names outside llmrec/rundir.py:\n" + "\n".join(found)
