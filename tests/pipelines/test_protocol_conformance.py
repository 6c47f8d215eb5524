"""The declared benchmark protocol: every benchmark subclasses the core ``Benchmark`` and the capabilities it
uses (each with defaults), and one that does not conform fails when it is discovered or imported — at ``llmrec list`` —
naming what is missing, before any model call is paid for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmrec.errors import ConfigError
from llmrec.pipelines.protocol import PairedOutcomes, check_benchmark
from llmrec.pipelines.registry import BENCHMARKS
from llmrec.registry import Registry
from tests.conftest import REPO
from tests.pipelines.toy.benchmark import NAME as TOY

BAD = "tests.pipelines.toy.nonconforming.bad:BENCHMARK"
WHAT = ("missing score", "Presents.plots(cfg, rows, out_dir) must take 4 positional argument(s)",
        "Presents.headline_metrics must be a tuple of str",
        "defines explain of the capability Explains without declaring it")


def test_every_benchmark_conforms_with_defaults():
    for name in BENCHMARKS.names():
        check_benchmark(BENCHMARKS.get(name), name)
    from llmrec.pipelines import capabilities as caps

    toy = BENCHMARKS.get(TOY)  # a plugin by path is checked on import too
    assert not isinstance(toy, caps.HasAssets) and caps.assets(toy, None, None) is None  # the capability's default
    assert toy.plots(None, [], None, None) == []  # Presents' default, not overridden


def test_a_plugin_that_does_not_conform_fails_on_import_naming_what_is_missing():
    with pytest.raises(ConfigError) as e:
        BENCHMARKS.get(BAD)
    msg = str(e.value)
    assert "\n" not in msg and "Bad" in msg and all(w in msg for w in WHAT), msg


def test_registration_refuses_it():
    import tests.pipelines.toy.nonconforming.bad as bad

    r = Registry("benchmark", check=check_benchmark)
    with pytest.raises(ConfigError, match="missing score"):
        r.register("bad", bad.BENCHMARK)
    assert "bad" not in r
    with pytest.raises(ConfigError, match="not a subclass of llmrec.pipelines.protocol.Benchmark"):
        r.register("plain", object())


def test_a_key_typo_fails_at_registration_naming_the_key_and_the_choices():
    """A protocol key that is not a config field would silently drop the option from the protocol record; a
    cluster key that is not a declared field would fail only at ``llmrec compare``. Both fail at registration."""
    from tests.pipelines.toy.benchmark import Toy

    class Typo(Toy):
        protocol_keys = ("n", "truncat")
        cluster_key = "indx"

    r = Registry("benchmark", check=check_benchmark)
    with pytest.raises(ConfigError) as e:
        r.register("typo", Typo())
    msg = str(e.value)
    assert "protocol key 'truncat' is not a field of ToyConfig (fields: name, limit, n, " in msg
    assert "truncate" in msg and "cluster_key 'indx' is not a declared field" in msg and "\n" not in msg

    class Keyed(Toy):
        cluster_key = "kind"
        cluster = PairedOutcomes.cluster  # the capability's default: the cluster_key field

    r.register("keyed", Keyed())
    assert Keyed().cluster({"sample_id": "s", "kind": "odd"}) == "odd"


@pytest.mark.integration  # a clean interpreter with a broken plugin
def test_llmrec_list_fails_naming_what_is_missing():
    """Discovery over a benchmarks folder holding the bad benchmark: the CLI stops with one line."""
    code = ("import sys; import llmrec.pipelines.registry as r; r.BENCHMARK_PACKAGE = 'tests.pipelines.toy.nonconforming'; "
            "sys.argv = ['llmrec', 'list']; from llmrec.cli import main; main()")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and all(w in " ".join(res.stderr.split()) for w in WHAT), res.stderr
