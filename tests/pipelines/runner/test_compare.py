"""`llmrec compare` on run directories of the toy benchmark answered by the fake engine (the worker run
without Ray, then written as `llmrec run` writes them): the table, the files, the dropped samples, the
protocol refusal and --allow-protocol-diff, several runs against a baseline, the MLflow comparison run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from llmrec.config import dump_yaml
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.protocol import (Aggregates, Benchmark, BenchmarkConfig, PairedOutcomes, Presents,
                                       outcomes_from_fields)
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.pipelines.toy.benchmark import NAME

runner = CliRunner()
N = 24


@pytest.fixture(autouse=True, scope="module")
def verbs():
    if not any(c.name == "compare" for c in app.registered_commands):
        _mount_extra_verbs()


def fake_run(tmp_path, name: str, default: str, wrong: tuple[int, ...] = (), tracking: bool = False,
             missing: tuple[int, ...] = (), **bench) -> str:
    """A run directory as `llmrec run` leaves it: resolved.yaml and the result store. The fake engine
    answers ``default`` ("yes" is right) except to the samples in ``wrong`` (use indices whose text
    "question i" is no prefix of another's); the samples in ``missing`` never reached the store."""
    rules = [{"contains": f"question {i}", "reply": "no" if default == "yes" else "yes"} for i in wrong]
    engine = {"type": "fake", "context_length": 60, "default": default, "rules": rules}
    cfg = RunConfig.model_validate({
        "benchmark": {"name": NAME, "n": N, "rounds": 0, **bench}, "engine": engine,
        "output": {"dir": str(tmp_path / "runs"), "run_name": name},
        "tracking": {"enabled": tracking, "uri": f"sqlite:///{tmp_path}/mlruns.db",
                     "artifact_root": str(tmp_path / "art")}})
    bench_cfg = benchmark_config(cfg.benchmark.model_dump(mode="json"))
    eng = build_engine(engine)
    rows = process_samples(get_benchmark(NAME), bench_cfg, get_benchmark(NAME).build_samples(bench_cfg, None),
                           lambda role: eng, retries=1, backoff_s=0.0)
    d = tmp_path / "runs" / name
    ResultStore(d / "results").write([r for r in rows if r["index"] not in missing])
    (d / "resolved.yaml").write_text(dump_yaml(cfg))
    return str(d)


def test_two_runs_table_files_and_dropped_samples(tmp_path):
    a = fake_run(tmp_path, "base", "no", bad_render=[5])  # all wrong; sample 5 fails
    b = fake_run(tmp_path, "better", "yes", wrong=(9,), bad_render=[7])  # all right but 9; sample 7 fails
    res = runner.invoke(app, ["compare", a, b, "--resamples", "200"], env={"COLUMNS": "90"})
    assert res.exit_code == 0, res.output
    assert max(map(len, res.output.splitlines())) <= 90  # fitted to the terminal's width
    text = " ".join(res.output.replace("│", " ").replace("┃", " ").split())
    for col in ("metric", "A", "B", "diff [95% CI]", "p_holm", "n (cl.)"):
        assert col in text
    # the tests in the title: exact McNemar per setting, the cluster permutation test pooled over the clusters
    assert "test: exact McNemar, paired permutation (clusters swapped)" in text
    assert "A = base; B = better" in text
    assert "accuracy · all" in text and "0.000 0.955 +0.955 [0.8" in text and "<0.001" in text  # A | B | diff; p
    assert "failed in a 1" in text and "failed in b 1" in text
    out = tmp_path / "runs" / "comparisons" / "base--vs--better"  # beside the runs, in a folder of its own
    assert not (tmp_path / "runs" / "base" / "comparisons").exists()
    doc = json.loads((out / "comparison.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["base", "better"]
    assert doc["protocol_diff"] == {"allowed": False, "differences": []}
    assert doc["dropped"] == [{"a": "base", "b": "better", "group": "toy", "samples_a": N, "samples_b": N,
                               "missing_in_a": 0, "missing_in_b": 0, "failed_in_a": 1, "failed_in_b": 1,
                               "failed_in_both": 0, "no_outcome": {}}]
    rows = {r["setting"]: r for r in doc["rows"]}
    assert set(rows) == {"kind=even", "kind=odd", "all"}
    pooled = rows["all"]
    assert pooled["n_pairs"] == N - 2 and pooled["n_clusters"] == N // 2 and pooled["test"] == "permutation-cluster"
    assert pooled["value_a"] == 0 and pooled["diff"] == pytest.approx(21 / 22) and pooled["ci_low"] > 0.8
    even = rows["kind=even"]
    assert even["test"] == "mcnemar-exact" and even["n_pairs"] == 12 and even["p"] == pytest.approx(2 * 0.5 ** 12)
    assert rows["kind=odd"]["n_pairs"] == 10 and rows["kind=odd"]["diff"] == pytest.approx(0.9)
    assert all(r["p_holm"] >= r["p"] for r in doc["rows"])
    per = pd.read_parquet(out / "per_sample.parquet")
    assert {"sample_id", "setting", "cluster", "metric", "value_a", "value_b", "diff"} <= set(per.columns)
    assert len(per) == N - 2 and set(per["sample_id"]).isdisjoint({"toy-5", "toy-7"})
    assert per.set_index("sample_id").loc["toy-9", "diff"] == 0 and per["diff"].sum() == N - 3


def test_a_comparison_is_never_written_into_a_compared_run(tmp_path):
    a, b = fake_run(tmp_path, "a", "no"), fake_run(tmp_path, "b", "yes")
    for inside in (a, f"{b}/cmp"):
        res = runner.invoke(app, ["compare", a, b, "--out", inside, "--resamples", "200"])
        assert res.exit_code == 2 and "inside the run directory" in " ".join(res.output.split()), res.output
    assert not (tmp_path / "runs" / "b" / "cmp").exists() and not (tmp_path / "runs" / "a" / "comparison.json").exists()


def test_p_values_print_as_people_read_them():
    from llmrec.pipelines.results.compare import fmt_p

    assert [fmt_p(p) for p in (1.0, 0.5, 0.0432, 0.004, 0.0004, float("nan"), None)] == \
        ["1.00", "0.50", "0.04", "0.004", "<0.001", "–", "–"]


def test_missing_samples_are_dropped_and_counted(tmp_path):
    a = fake_run(tmp_path, "a", "no")
    b = fake_run(tmp_path, "b", "yes", missing=(0, 1, 2, 3))
    res = runner.invoke(app, ["compare", a, b, "--out", str(tmp_path / "cmp"), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert doc["dropped"][0]["missing_in_b"] == 4 and doc["dropped"][0]["missing_in_a"] == 0
    assert next(r for r in doc["rows"] if r["setting"] == "all")["n_pairs"] == N - 4


def test_protocol_difference_is_refused_naming_the_keys(tmp_path):
    a = fake_run(tmp_path, "a", "no")
    b = fake_run(tmp_path, "b", "yes", truncate=True)
    res = runner.invoke(app, ["compare", a, b])
    assert res.exit_code == 2
    msg = " ".join(res.output.split())
    assert "benchmark.truncate False → True" in msg and "--allow-protocol-diff" in msg and "Traceback" not in msg
    assert not (tmp_path / "runs" / "comparisons" / "a--vs--b").exists()

    res = runner.invoke(app, ["compare", a, b, "--allow-protocol-diff", "--resamples", "200"])
    assert res.exit_code == 0, res.output
    assert "PROTOCOLS DIFFER (compared with --allow-protocol-diff): benchmark.truncate" in " ".join(res.output.split())
    doc = json.loads((tmp_path / "runs" / "comparisons" / "a--vs--b" / "comparison.json").read_text())
    assert doc["protocol_diff"] == {"allowed": True, "differences": [
        {"a": "a", "b": "b", "key": "benchmark.truncate", "value_a": False, "value_b": True}]}


def test_runs_of_different_benchmarks_or_not_runs_are_refused(tmp_path):
    a = fake_run(tmp_path, "a", "no")
    other = tmp_path / "runs" / "other"
    other.mkdir()
    cfg = RunConfig.model_validate({"benchmark": {"name": "lrworld"}, "engine": {"type": "fake"}})
    (other / "resolved.yaml").write_text(dump_yaml(cfg))
    ResultStore(other / "results").write([{"sample_id": "x", "status": "ok"}])
    res = runner.invoke(app, ["compare", a, str(other)])
    assert res.exit_code == 2 and "runs of different benchmarks cannot be compared: a is toy, other is lrworld" in \
        " ".join(res.output.split())
    res = runner.invoke(app, ["compare", a])
    assert res.exit_code == 2 and "nothing to compare: 1 run(s)" in res.output
    res = runner.invoke(app, ["compare", a, str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no such run or suite directory" in res.output


def test_three_runs_against_the_baseline_with_holm_over_all_comparisons(tmp_path):
    runs = [fake_run(tmp_path, "a", "no"), fake_run(tmp_path, "b", "yes"), fake_run(tmp_path, "c", "no", wrong=(3, 5))]
    res = runner.invoke(app, ["compare", *runs, "--out", str(tmp_path / "cmp"), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert {(r["a"], r["b"]) for r in doc["rows"]} == {("a", "b"), ("a", "c")} and len(doc["rows"]) == 6
    from statsmodels.stats.multitest import multipletests

    assert [r["p_holm"] for r in doc["rows"]] == pytest.approx(
        list(multipletests([r["p"] for r in doc["rows"]], method="holm")[1]))
    per = pd.read_parquet(tmp_path / "cmp" / "per_sample.parquet")
    assert set(per["b"]) == {"b", "c"} and len(per) == 2 * N


def test_suite_directory_compares_its_subjects_per_entry(tmp_path):
    a = fake_run(tmp_path, "a", "no")
    b = fake_run(tmp_path, "b", "yes")
    suite = tmp_path / "suite"
    suite.mkdir()
    entries = [{"subject": s, "benchmark": NAME, "entry": "toy", "kind": "llm", "run_dir": d, "headline": ["accuracy"],
                "mlflow_run_id": None} for s, d in (("m1", a), ("m2", b))]
    entries.append({"subject": "pop", "benchmark": NAME, "entry": "toy", "kind": "baseline", "run_dir": str(suite),
                    "headline": [], "mlflow_run_id": None})
    entries.append(dict(entries[0], entry="toy-long"))  # an entry only one subject ran: not compared, said
    (suite / "suite.json").write_text(json.dumps({"name": "s", "subjects": ["m1", "m2"], "entries": entries}))
    res = runner.invoke(app, ["compare", str(suite), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    doc = json.loads((suite / "comparisons" / "m1--vs--m2" / "comparison.json").read_text())  # where report looks
    assert {(r["group"], r["a"], r["b"]) for r in doc["rows"]} == {("toy", "m1/toy", "m2/toy")}
    assert doc["not_compared"] == ["m1/toy-long"] and "not compared (alone in their suite entry): m1/toy-long" in \
        " ".join(res.output.split())


def test_metric_option_and_mlflow_comparison_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the reader's own default artifact root
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlruns.db")  # the reader's store
    a = fake_run(tmp_path, "a", "no", tracking=True)
    b = fake_run(tmp_path, "b", "yes", tracking=True)
    res = runner.invoke(app, ["compare", a, b, "--metric", "nope"])
    assert res.exit_code == 2 and "compared metrics: accuracy" in res.output
    res = runner.invoke(app, ["compare", a, b, "--metric", "accuracy", "--resamples", "200"])
    assert res.exit_code == 0, res.output
    from llmrec import tracking

    client = tracking.client(f"sqlite:///{tmp_path}/mlruns.db")
    (run,) = client.search_runs([client.get_experiment_by_name("toy").experiment_id])
    assert run.data.tags[tracking.TAG_KIND] == "compare" and run.data.params["run_a"] == a
    assert run.info.run_name == "compare · a vs b"
    assert run.data.params["run_b"] == b and run.info.status == "FINISHED"
    assert run.data.metrics["accuracy/all/diff"] == 1.0 and "accuracy/kind_even/p_holm" in run.data.metrics
    assert {f.path for f in client.list_artifacts(run.info.run_id)} == {"comparison.json", "per_sample.parquet"}


def test_default_paired_outcomes_read_the_headline_fields_score_wrote():
    class Plain(Benchmark, Aggregates, Presents, PairedOutcomes):
        name, config_cls, group_keys = "plain", BenchmarkConfig, ("k",)
        headline_metrics = ("hit", "failed")

    rows = [{"sample_id": "s1", "status": "ok", "k": 1, "hit": True}, {"sample_id": "s2", "status": "failed", "k": 1},
            {"sample_id": "s3", "status": "ok", "k": 2, "hit": None},
            {"sample_id": "s4", "status": "ok", "k": 2, "hit": 0.5}]
    outs = Plain().paired_outcomes(None, rows, None)
    assert [(o.sample_id, o.setting, o.cluster, o.metric, o.value) for o in outs] == [
        ("s1", "k=1", "s1", "hit", 1.0), ("s4", "k=2", "s4", "hit", 0.5)]
    assert outcomes_from_fields(Plain(), rows, {"acc": "hit"}, cluster=lambda r: "u")[0].cluster == "u"


def test_prefeval_perrecbench_lrworld_outcomes_reproduce_their_headline_means():
    pe = get_benchmark("prefeval")
    cfg = benchmark_config({"name": "prefeval", "task": "mcq"})
    rows = [{"sample_id": f"t/{f}/{i}", "status": "ok", "task": "mcq", "topic": "t", "task_id": i, "form": f,
             "turns": 2, "method": "zero-shot", "correct": (i + (f == "x")) % 2 == 0, "missed": i == 1}
            for i in range(4) for f in ("x", "y")] + [{"sample_id": "t/x/9", "status": "failed", "topic": "t"}]
    outs = pe.paired_outcomes(cfg, rows, None)
    agg = pe.aggregate(cfg, rows, None)
    acc = [o.value for o in outs if o.metric == "accuracy"]
    assert len(acc) == 8 and sum(acc) / 8 == pytest.approx(agg["accuracy"])
    assert {o.cluster for o in outs} == {"t/0000", "t/0001", "t/0002", "t/0003"}  # a preference's forms together

    prb = get_benchmark("perrecbench")
    line = {"status": "ok", "level": "easy", "relative_ratings": [1.0, -1.0, 0.5], "avg_ratings": [3.0, 3.0, 3.0]}
    rows = [dict(line, sample_id="g1/list", group_id="g1", item_id="i1", mode="list", prediction=[1, 3, 2]),
            dict(line, sample_id="g1/pair", group_id="g1", item_id="i1", mode="pair", prediction=[3, 1, 2]),
            dict(line, sample_id="g2/list", group_id="g2", item_id="i2", mode="list", prediction=None)]
    rows = [dict(r, **{k: v for k, v in prb.score(None, r).items() if k != "prediction"}) for r in rows]
    outs = prb.paired_outcomes(None, rows, None)
    assert {(o.sample_id, o.cluster) for o in outs} == {("g1/list", "i1"), ("g1/pair", "i1")}  # g2 unusable
    ptc = [o.value for o in outs if o.metric == "ptc"]
    assert sum(ptc) / 2 == pytest.approx(prb.aggregate(benchmark_config({"name": "perrecbench"}), rows, None)["ptc"])

    lw = get_benchmark("lrworld")
    rows = [{"sample_id": f"s{i}|{v}|r0", "base_id": f"s{i}", "status": "ok", "variant": v, "correct": i % 3 == 0,
             "missed": False, "user_id": "u1" if i < 2 else None, "domain": "ml"} for i in range(6)
            for v in ("base", "noisy")]
    outs = lw.paired_outcomes(None, rows, None)
    assert {o.metric for o in outs} == {"base/accuracy", "base/missed_rate", "noisy/accuracy", "noisy/missed_rate"}
    assert {o.cluster for o in outs} == {"ml/user/u1", "s2", "s3", "s4", "s5"}
    assert {o.setting for o in outs if o.metric.startswith("noisy")} == {"variant=noisy"}


def test_runs_with_no_shared_answered_sample_say_so(tmp_path):
    a = fake_run(tmp_path, "a", "no", missing=tuple(range(12)))
    b = fake_run(tmp_path, "b", "yes", missing=tuple(range(12, N)))
    res = runner.invoke(app, ["compare", a, b])
    assert res.exit_code == 2 and "no unit has an outcome in both runs" in " ".join(res.output.split())


@pytest.mark.slow
@pytest.mark.integration
def test_two_real_prefeval_runs_compare_from_their_store_and_from_samples_parquet(tmp_path, local_ray, data_root):
    """`llmrec run`'s own run directories (PrefEval MCQ, fake engine answering A or B): paired on the same
    samples; a copy without results/ compares the same from samples.parquet."""
    import shutil

    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.runner.run_config import load_run_config
    from tests.pipelines.conftest import config

    runs = []
    for name, answer in (("a", "A"), ("b", "B")):
        path = config(tmp_path, f"{name}.yaml", engine={"type": "fake", "default": f"<choice>{answer}</choice>"},
                      forms=["explicit"], methods=["zero-shot"], per_topic=3)
        cfg = load_run_config(path, [f"output.run_name={name}", f"data.dir={data_root}", "tracking.enabled=false"])
        runs.append(str(run_evaluation(cfg).run_dir))
    res = runner.invoke(app, ["compare", *runs, "--out", str(tmp_path / "store"), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    flat = tmp_path / "runs" / "b-flat"
    shutil.copytree(runs[1], flat, ignore=shutil.ignore_patterns("results"))
    res = runner.invoke(app, ["compare", runs[0], str(flat), "--out", str(tmp_path / "flat"), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    store, parquet = (json.loads((tmp_path / d / "comparison.json").read_text()) for d in ("store", "flat"))
    assert [r["setting"] for r in store["rows"]] == [
        "task=mcq,form=explicit,turns=0,method=zero-shot,position=start,extra_prefs=0,conflict=False",
        "task=mcq,form=explicit,turns=2,method=zero-shot,position=start,extra_prefs=0,conflict=False", "all"] * 2
    pooled = next(r for r in store["rows"] if r["metric"] == "accuracy" and r["setting"] == "all")
    assert pooled["n_pairs"] == 12 and pooled["n_clusters"] == 6 and pooled["test"] == "permutation-cluster"
    drop = ("b",)  # the label: "b" vs "b-flat"
    assert [{k: v for k, v in r.items() if k not in drop} for r in store["rows"]] == \
        [{k: v for k, v in r.items() if k not in drop} for r in parquet["rows"]]


def test_a_paired_outcomes_of_the_wrong_arity_does_not_conform():
    from llmrec.errors import ConfigError
    from llmrec.pipelines.protocol import check_benchmark

    class Wrong(Benchmark, Aggregates, PairedOutcomes):
        name, config_cls = "wrong", BenchmarkConfig

        def build_samples(self, cfg, data_dir):
            return []

        def stages(self, cfg):
            return []

        def score(self, cfg, sample):
            return {}

        def aggregate(self, cfg, rows, assets):
            return {}

        def paired_outcomes(self, rows):
            return []

    with pytest.raises(ConfigError, match=r"paired_outcomes\(rows\) must take 3 positional argument"):
        check_benchmark(Wrong(), "wrong")
