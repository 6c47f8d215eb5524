"""Issue 22: ``module:ATTR`` plugin names are checked for their form before anything is imported,
and the imported object must be what the registry holds; each mistake is one clear line."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner
import yaml

from llmrec.config import validate
from llmrec.cli import app
from llmrec.errors import ConfigError
from llmrec.pipelines.registry import get_benchmark
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.registry import Registry

PROBE = "tests.security.plugin_probe"


@pytest.mark.parametrize("spec", [f"{PROBE}:", f":{PROBE}", f"{PROBE}:A:B", f"{PROBE}:os.system()",
                                  "tests/security/plugin_probe:X", "../plugin_probe:X", f"{PROBE} :X",
                                  f"{PROBE}..x:X", "1abc:X"])
def test_a_malformed_plugin_path_is_refused_before_importing_anything(spec):
    sys.modules.pop(PROBE, None)
    with pytest.raises(ConfigError, match=r"nor a plugin path of the form 'package.module:ATTR'"):
        get_benchmark(spec)
    assert PROBE not in sys.modules  # nothing was imported


def test_an_object_that_is_not_a_benchmark_is_refused_naming_what_was_expected():
    with pytest.raises(ConfigError, match=rf"benchmark '{PROBE}:NOT_A_BENCHMARK' \(builtins.dict\) does not conform "
                                          r"to the protocol: not a subclass of llmrec.pipelines.protocol.Benchmark"):
        get_benchmark(f"{PROBE}:NOT_A_BENCHMARK")
    with pytest.raises(ConfigError, match=r"engine '.*:NotAnEngine' is a type, not an EngineSpec"):
        validate(RunConfig, {"benchmark": {"name": "tests.pipelines.toy.benchmark:BENCHMARK"},
                             "engine": {"type": f"{PROBE}:NotAnEngine"}})
    with pytest.raises(ConfigError, match=r"cannot import 'MISSING'"):
        get_benchmark(f"{PROBE}:MISSING")
    with pytest.raises(ConfigError, match=r"cannot import 'X' from 'no_such_module_xyz': ModuleNotFoundError"):
        get_benchmark("no_such_module_xyz:X")


def test_a_registry_without_a_check_still_imports_valid_paths():
    assert Registry("widget").get(f"{PROBE}:NotAnEngine").__name__ == "NotAnEngine"


def test_llmrec_run_prints_one_line_for_a_non_benchmark(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"benchmark": {"name": "os:sep"}, "engine": {"type": "fake"},
                                   "output": {"dir": str(tmp_path / "runs")}}))
    out = CliRunner().invoke(app, ["run", str(cfg)])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "benchmark 'os:sep' (builtins.str) does not conform to the protocol" in out.output
