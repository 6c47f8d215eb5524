"""The contract by capability: a small core every benchmark supplies, opt-in capabilities with defaults. A
benchmark declaring only the core runs end to end on those defaults; a declared capability's member of the wrong
signature, or a capability's member defined without declaring it, fails at registration naming it."""

from __future__ import annotations

import inspect

import pytest

from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import Benchmark, Judged, check_benchmark
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.worker import process_samples
from llmrec.registry import Registry
from llmrec.serving.engine import build_engine
from tests.pipelines.toy.core_only import NAME as CORE_TOY, CoreToy


def core_members() -> list[str]:
    """The core class's declared attributes and methods (what a benchmark must supply)."""
    declared = set(inspect.get_annotations(Benchmark))
    declared |= {k for k, v in vars(Benchmark).items() if not k.startswith("__") and callable(v)}
    return sorted(declared)


def test_the_core_has_at_most_six_members():
    members = core_members()
    assert len(members) <= 6, members
    assert members == sorted(["name", "config_cls", "payload", "build_samples", "stages", "score"])
    for cap, spec in caps.CAPABILITIES.items():  # no capability re-declares a core member, none shares a member
        assert not {m.name for m in spec} & set(members), cap
    names = [m.name for spec in caps.CAPABILITIES.values() for m in spec]
    assert len(names) == len(set(names))


def test_every_capability_member_is_declared_on_its_mixin_with_its_default():
    for cap, spec in caps.CAPABILITIES.items():
        for m in spec:
            assert m.name in vars(cap), f"{cap.__name__}.{m.name}"
            assert caps.capability_of(m.name) is cap


def test_a_core_only_benchmark_conforms_and_gets_every_default():
    bench = get_benchmark(CORE_TOY)
    check_benchmark(bench, "core")
    assert not any(isinstance(bench, cap) for cap in caps.CAPABILITIES)
    assert caps.group_keys(bench) == () and caps.headline_metrics(bench) == () and caps.protocol_keys(bench) == ()
    assert caps.score_tasks(bench) == () and caps.predictions(bench) is None and caps.data(bench) is None
    assert caps.transient(bench) == () and caps.cli(bench) is None and caps.assets(bench, None, None) is None
    assert caps.judge_stages(bench) == () and caps.judged_metrics(bench) == () and caps.jury_fields(bench) is None
    assert caps.judge_decisions(bench, None, {}) == [] and caps.judge_failures(bench, None, {}) == (0, 0)
    assert caps.baselines(bench) is None and caps.ranking_baselines(bench) is None
    assert caps.entry_label(bench, {}) == "core_toy" and caps.absent_text(bench) is None
    assert caps.plots(bench, None, [], None, None) == [] and caps.cluster_key(bench) is None


def test_a_benchmark_declaring_a_capability_without_overriding_it_equals_one_without():
    """The accessors' default for a benchmark lacking a capability is the capability's own default."""

    class Everything(CoreToy, *caps.CAPABILITIES):
        pass

    row = {"sample_id": "s", "status": "ok", "answer": "yes", "correct": True, "index": 0, "kind": "even"}
    core, full = CoreToy(), Everything()
    check_benchmark(full, "everything")
    for bench in (core, full):
        assert caps.explain(bench, row).verdict == "right" and caps.cluster(bench, row) == "s"
        assert caps.drilldown(bench, row, None)["answer"] == "yes"
        assert caps.aggregate(bench, None, [row], None) == {"n_samples": 1.0, "failed": 0.0, "over_context": 0.0}
    assert caps.explain(core, row) == caps.explain(full, row)


def test_a_core_only_benchmark_runs_through_the_worker_with_defaults():
    bench = get_benchmark(CORE_TOY)
    cfg = benchmark_config({"name": CORE_TOY, "n": 4, "long": [1]})
    engine = build_engine({"type": "fake", "context_length": 60, "default": "yes"})
    rows = process_samples(bench, cfg, bench.build_samples(cfg, None), lambda role: engine, retries=0, backoff_s=0.0)
    assert [r["status"] for r in rows] == ["ok", "over_context", "ok", "ok"]
    assert caps.aggregate(bench, cfg, rows, None) == {"n_samples": 4.0, "failed": 0.0, "over_context": 1.0}
    assert caps.paired_outcomes(bench, cfg, rows, None) == []  # no headline metrics: nothing to pair
    assert [caps.explain(bench, r).verdict for r in rows] == ["right", "failed", "right", "right"]


def test_a_core_only_benchmark_runs_end_to_end(tmp_path, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.run_config import RunConfig

    cfg = RunConfig.model_validate({
        "benchmark": {"name": CORE_TOY, "n": 4},
        "engine": {"type": "fake", "context_length": 60, "default": "yes"},
        "execution": {"batch_size": 2, "backoff_s": 0.01, "retries": 0},
        "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs")},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")},
    })
    out = run_evaluation(cfg)
    assert out.metrics == {"n_samples": 4.0, "failed": 0.0, "over_context": 0.0}
    assert out.headline == () and out.judged == ()
    assert (out.run_dir / "results").exists()


def test_a_capability_member_of_the_wrong_signature_fails_at_registration_naming_it():
    class Misjudged(CoreToy, Judged):
        judge_stages = ("judge",)

        def judge_decisions(self, row):  # the protocol passes (cfg, row)
            return []

    with pytest.raises(ConfigError) as e:
        Registry("benchmark", check=check_benchmark).register("misjudged", Misjudged())
    msg = str(e.value)
    assert "benchmark 'misjudged'" in msg and "Misjudged" in msg and "\n" not in msg
    assert "Judged.judge_decisions(row) must take 2 positional argument(s)" in msg


def test_a_capability_member_without_its_capability_fails_at_registration():
    """Callers reach a member through its capability, so one defined without declaring it would never be called."""

    class Forgot(CoreToy):
        headline_metrics = ("accuracy",)

        def explain(self, row):
            return None

    with pytest.raises(ConfigError) as e:
        check_benchmark(Forgot(), "forgot")
    msg = str(e.value)
    assert "defines headline_metrics of the capability Presents without declaring it" in msg
    assert "defines explain of the capability Explains without declaring it" in msg
