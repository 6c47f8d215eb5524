"""Reading results never imports what they name: a run directory's config or a suite index naming
``probe_mod:BENCH`` (a module whose import-time code writes a file) is reported as an unknown, not installed
benchmark by leaderboard, report and compare, and the module is never imported. Plugins are honoured only in
configs the user runs."""

from __future__ import annotations

import sys

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.errors import ConfigError
from llmrec.rundir import RunDir, SuiteDir

PROBE = "probe_mod"


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """``probe_mod`` on sys.path: importing it writes ``imported.txt`` (and defines BENCH)."""
    marker = tmp_path / "imported.txt"
    code = tmp_path / "code"
    code.mkdir()
    (code / f"{PROBE}.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
                                      "BENCH = None\nENGINE = None\n")
    monkeypatch.syspath_prepend(str(code))
    sys.modules.pop(PROBE, None)
    yield marker
    sys.modules.pop(PROBE, None)


def _run_dir(d, benchmark: str = f"{PROBE}:BENCH", engine: str = "fake"):
    rd = RunDir(d)
    rd.mkdir()
    rd.write_config(yaml.safe_dump({"benchmark": {"name": benchmark}, "engine": {"type": engine, "model": "m"},
                                    "tracking": {"enabled": False}}))
    rd.write_metrics({"accuracy": 0.5})
    rows = [{"sample_id": f"s{i}", "status": "ok", "correct": True} for i in range(3)]
    import pandas as pd

    pd.DataFrame(rows).to_parquet(rd.file(RunDir.SAMPLES), index=False)
    return d


def _suite(tmp_path, benchmark: str = f"{PROBE}:BENCH"):
    s = tmp_path / "suite"
    for subject in ("a", "b"):
        _run_dir(s / subject / "e", benchmark)
    SuiteDir(s).write_index({"name": "s", "subjects": ["a", "b"], "entries": [
        {"subject": x, "benchmark": benchmark, "entry": "e", "kind": "llm", "run_dir": f"{x}/e"} for x in "ab"]})
    return s


def _cli(args):
    from llmrec.cli import _mount_extra_verbs, app

    _mount_extra_verbs()
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("verb", ["leaderboard", "report", "compare"])
@pytest.mark.parametrize("source", ["runs", "suite"])
def test_a_plugin_named_by_results_is_not_imported(tmp_path, probe, verb, source):
    if source == "suite":
        paths = [str(_suite(tmp_path))]
    else:
        paths = [str(_run_dir(tmp_path / "r1")), str(_run_dir(tmp_path / "r2"))]
    extra = {"leaderboard": ["--no-tracking", "--out", str(tmp_path / "lb")],
             "report": ["--out", str(tmp_path / "r.html")], "compare": ["--out", str(tmp_path / "cmp")]}[verb]
    res = _cli([verb, *paths, *extra])
    assert res.exit_code == 2, res.output
    assert f"unknown benchmark '{PROBE}:BENCH' (not installed" in " ".join(res.output.split())
    assert "Traceback" not in res.output
    assert not probe.exists() and PROBE not in sys.modules  # its import-time code never ran


def test_a_plugin_engine_named_by_a_run_config_is_not_imported(tmp_path, probe):
    from llmrec.pipelines.results.compare import compare_runs

    a, b = _run_dir(tmp_path / "a", "prefeval", f"{PROBE}:ENGINE"), _run_dir(tmp_path / "b", "prefeval")
    with pytest.raises(ConfigError, match=rf"unknown engine '{PROBE}:ENGINE' \(not installed"):
        compare_runs([a, b])
    assert not probe.exists() and PROBE not in sys.modules


def test_the_api_readers_import_nothing_either(tmp_path, probe):
    from llmrec.pipelines.results.html_report import render
    from llmrec.pipelines.results.leaderboard import leaderboard

    s = _suite(tmp_path)
    for read in (leaderboard, render):
        with pytest.raises(ConfigError, match=r"suite/suite.json: entries.0: .*not installed"):
            read([s])
    assert not probe.exists() and PROBE not in sys.modules


def test_a_plugin_the_user_ran_in_this_process_is_still_read(tmp_path):
    """The toy benchmark is a plugin this test imported (as `llmrec run` on its config would): its results read."""
    from llmrec.pipelines.results.leaderboard import leaderboard
    from tests.pipelines.toy.benchmark import NAME

    df = leaderboard([_run_dir(tmp_path / "toy", NAME)])
    assert list(df.metric) == ["accuracy", "failed"] and df.value.iloc[0] == 0.5


def test_installed_names_resolve_inside_and_typos_say_not_installed():
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.registry import installed_only

    with installed_only():
        assert get_benchmark("prefeval").name == "prefeval"
        with pytest.raises(ConfigError, match=r"Unknown benchmark 'prefevl' \(not installed\)"):
            get_benchmark("prefevl")
        with pytest.raises(ConfigError, match="not installed"):
            get_benchmark("os:sep")  # a loaded module's attribute that is no benchmark: still refused
    with pytest.raises(ConfigError, match="does not conform"):  # outside: a config the user runs may name a plugin
        get_benchmark("os:sep")

