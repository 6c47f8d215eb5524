"""The leaderboard shows the probe beside the other benchmarks: one column per probed catalogue, and "not probed"
for an LLM subject without a probe run of that catalogue among the inputs."""

from __future__ import annotations

import yaml

from llmrec.pipelines.results.leaderboard import leaderboard, wide
from tests.pipelines.results_fixtures import write_run

PROBE = {"coverage": 0.25, "coverage_ci_low": 0.125, "coverage_ci_high": 0.4, "coverage_ci_clusters": 40,
         "coverage_normalised": 0.3, "failed": 0, "n_samples": 40, "n_answered": 40}


def _probe(d, model: str, catalogue: str):
    write_run(d, "memorization", model, PROBE)
    cfg = yaml.safe_load((d / "resolved.yaml").read_text())
    cfg["benchmark"]["catalogue"] = catalogue
    (d / "resolved.yaml").write_text(yaml.safe_dump(cfg))
    return d


def test_a_memorization_column_per_catalogue_and_not_probed_where_a_subject_has_none(tmp_path):
    runs = [write_run(tmp_path / "pe-a", "prefeval", "gemma", {"accuracy": 0.5, "missed_rate": 0.0}),
            write_run(tmp_path / "pe-b", "prefeval", "qwen", {"accuracy": 0.6, "missed_rate": 0.1}),
            _probe(tmp_path / "mem-a", "gemma", "ml-100k"), _probe(tmp_path / "mem-b", "qwen", "ml-1m")]
    table = wide(leaderboard(runs)).set_index("subject")
    assert table.loc["gemma", "memorization ml-100k: coverage"] == "0.250 [0.125, 0.400] n=40"
    assert table.loc["qwen", "memorization ml-100k: coverage"] == "not probed"
    assert table.loc["qwen", "memorization ml-1m: coverage"].startswith("0.250 [0.125, 0.400]")
    assert table.loc["gemma", "memorization ml-1m: coverage"] == "not probed"
    assert table.loc["qwen", "prefeval: accuracy"].startswith("0.600")  # other benchmarks' cells unchanged


def test_a_suite_takes_the_probe_as_an_entry_beside_a_recommendation_benchmark(tmp_path):
    """The demo config as a suite entry, next to LRWorld: each subject's probe run is an ordinary run config."""
    from llmrec.pipelines.runner.suite_config import load_suite_config
    from tests.conftest import REPO

    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({
        "name": "probe-suite", "subjects": {"a": {"type": "fake"}, "b": {"type": "fake", "model": "b"}},
        "benchmarks": [{"entry": "mem-ml100k", "config": str(REPO / "configs" / "memorization_demo.yaml")},
                       {"entry": "mem-ml1m", "benchmark": {"name": "memorization", "catalogue": "ml-1m", "items": 5}},
                       {"entry": "lrw", "config": str(REPO / "configs" / "lrworld_demo.yaml")}]}))
    cfg = load_suite_config(path)
    run = cfg.run_config("b", cfg.benchmarks[1])
    assert run.benchmark.name == "memorization" and run.benchmark.catalogue == "ml-1m" and run.benchmark.items == 5
    assert cfg.run_config("a", cfg.benchmarks[0]).benchmark.items == 40
