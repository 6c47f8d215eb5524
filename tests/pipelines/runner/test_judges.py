"""Judges you can check: agreement statistics, a jury's verdicts, `llmrec rejudge` over stored subject outputs
(no subject request), `llmrec judges` between a run and its rejudge and within a jury run, the pinned judge in the
protocol."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from llmrec.agreement import PAIR_COLUMNS, decision_agreement, kappa_from_counts
from llmrec.errors import ConfigError
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.judges import JudgingSpec
from llmrec.pipelines.runner.worker import process_samples
from llmrec.serving.engine import build_engine
from tests.pipelines.conftest import config

SUBJECT = {"type": "fake", "default": "Try the Grand Hotel downtown, it is lively at night."}
ACK = {"contains": "acknowledges any user preference", "reply": "<preference>quiet</preference><answer>Yes</answer>"}
HELPFUL = {"contains": "substantive response", "reply": "<answer>Yes</answer>"}
HALL = {"contains": "Original user preference", "reply": "<answer>No</answer>"}


def judge(model: str, violates: bool) -> dict:
    """A fake judge that says the answer violates the preference (or not), acknowledged, helpful."""
    verdict = "<answer>Yes</answer>" if violates else "<answer>No</answer>"
    return {"type": "fake", "model": model, "default": "<answer>Yes</answer>",
            "rules": [ACK, HELPFUL, HALL, {"contains": "violates the user's stated preference", "reply": verdict}]}


# ---- agreement statistics (no run) -----------------------------------------------------------------------------

def test_kappa_agreement_confusion_and_cluster_ci():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 200).astype(bool)
    b = np.where(rng.random(200) < 0.8, a, ~a)  # agree ~80%
    pairs = pd.DataFrame({"decision": "violate", "sample_id": [f"s{i}" for i in range(200)], "unit": "",
                          "cluster": [f"u{i // 4}" for i in range(200)], "label_a": a, "label_b": b},
                         columns=PAIR_COLUMNS)
    (d,) = decision_agreement(pairs, resamples=500, seed=0)
    assert d.n == 200 and d.n_clusters == 50
    assert d.kappa == pytest.approx(cohen_kappa_score(a.astype(str), b.astype(str)))
    assert d.agreement == pytest.approx(np.mean(a == b))
    assert d.kappa_ci_low < d.kappa < d.kappa_ci_high and 0 < d.kappa_ci_high - d.kappa_ci_low < 0.5
    assert d.labels == ["false", "true"] and sum(map(sum, d.confusion)) == 200
    assert d.confusion[1][1] == int(np.sum(a & b)) and d.confusion[0][1] == int(np.sum(~a & b))
    # the matrix form of kappa is the one sklearn computes
    assert float(kappa_from_counts(np.array(d.confusion, dtype=float))) == pytest.approx(d.kappa)


def test_agreement_with_one_label_only_has_no_kappa():
    pairs = pd.DataFrame([("helpful", f"s{i}", "", f"c{i}", True, True) for i in range(5)], columns=PAIR_COLUMNS)
    (d,) = decision_agreement(pairs, resamples=200)
    assert d.agreement == 1.0 and np.isnan(d.kappa) and np.isnan(d.kappa_ci_low)


# ---- a jury inside the worker (no Ray) --------------------------------------------------------------------------

def _gen_samples(data_root: Path, n: int = 2):
    cfg = PrefEvalConfig(name="prefeval", task="gen", topics=["travel_hotel"], per_topic=n, forms=["explicit"],
                         turns=[0], methods=["zero-shot"])
    return cfg, BENCHMARK.build_samples(cfg, data_root), BENCHMARK.assets(cfg, data_root)


def _engines(**cfgs):
    made = {}
    for role, c in cfgs.items():
        made[role] = build_engine(c)
        made[role].start()
    return made.__getitem__


@pytest.mark.parametrize("tie,violated", [("strict", True), ("first", False)])
def test_two_judge_jury_stores_both_verdicts_and_breaks_ties_by_rule(data_root, tie, violated):
    cfg, samples, assets = _gen_samples(data_root)
    spec = JudgingSpec(roles=("judge", "judge2"), labels=("lenient", "harsh"), tie=tie, temperature=0.0, seed=0)
    engines = _engines(subject=SUBJECT, judge=judge("lenient", False), judge2=judge("harsh", True))
    out = process_samples(BENCHMARK, cfg, samples, engines, assets=assets, judging=spec)
    for s in out:
        assert s["status"] == "ok", s.get("error")
        assert set(s["jury"]) == {"lenient", "harsh"}
        assert "No" in s["jury"]["lenient"]["judge_violate"] and "Yes" in s["jury"]["harsh"]["judge_violate"]
        assert {"judge_violate[lenient]", "judge_violate[harsh]"} <= set(s["outputs"])
        assert s["violated"] is violated and s["correct"] is (not violated)  # 1:1 → the tie rule decides


def test_three_judge_jury_majority(data_root):
    cfg, samples, assets = _gen_samples(data_root, 1)
    spec = JudgingSpec(roles=("judge", "judge2", "judge3"), labels=("a", "b", "c"), tie="strict", temperature=0.0,
                       seed=0)
    engines = _engines(subject=SUBJECT, judge=judge("a", False), judge2=judge("b", True), judge3=judge("c", False))
    (s,) = process_samples(BENCHMARK, cfg, samples, engines, assets=assets, judging=spec)
    assert len(s["jury"]) == 3 and s["violated"] is False and s["correct"] is True


def test_judge_requests_go_out_with_pinned_sampling(data_root, tmp_path):
    cfg, samples, assets = _gen_samples(data_root, 1)
    seen = []

    class Recording:
        def __init__(self, inner):
            self.inner = inner

        def generate(self, requests):
            seen.extend(r.sampling for r in requests)
            return self.inner.generate(requests)

    subject, judge_engine = build_engine(SUBJECT), Recording(build_engine(judge("j", False)))
    spec = JudgingSpec(roles=("judge",), labels=("j",), tie="strict", temperature=0.0, seed=7)
    process_samples(BENCHMARK, cfg, samples, {"subject": subject, "judge": judge_engine}.__getitem__, assets=assets,
                    judging=spec)
    assert len(seen) == 4 and {(s.temperature, s.seed) for s in seen} == {(0.0, 7)}


# ---- end to end on a local Ray -------------------------------------------------------------------------------

def _gen_config(tmp_path: Path, name: str, judge_section, request_log: Path) -> Path:
    path = config(tmp_path, name=name, engine={**SUBJECT, "request_log": str(request_log)}, task="gen",
                  topics=["travel_hotel"], per_topic=3, forms=["explicit", "choice"], turns=[0],
                  methods=["zero-shot"])
    raw = yaml.safe_load(path.read_text())
    raw["judge"] = judge_section
    path.write_text(yaml.safe_dump(raw))
    return path


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_rejudge_agreement_and_jury_end_to_end(tmp_path, data_root, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.results.compare import compare_runs
    from llmrec.pipelines.results.judge_agreement import judges_report, tables
    from llmrec.pipelines.results.judges_cli import register
    from llmrec.pipelines.results.rejudge import rejudge_config, run_rejudge
    from llmrec.pipelines.runner.run_config import load_run_config
    from llmrec.rundir import RunDir

    log = tmp_path / "subject_requests.log"
    source = run_evaluation(load_run_config(_gen_config(tmp_path, "a.yaml", judge("harsh", True), log)), data_root)
    assert source.metrics["accuracy"] == 0.0 and source.metrics["n_judged"] == 6
    sent = _lines(log)
    assert sent == 3 * 2 + 3  # explicit: the preference reply and the answer; choice: the answer
    judge_file = tmp_path / "lenient.yaml"
    judge_file.write_text(yaml.safe_dump(judge("lenient", False)))

    store = [f"tracking.uri=sqlite:///{tmp_path}/mlruns.db", f"tracking.artifact_root={tmp_path}/mlartifacts"]
    cfg, _ = rejudge_config(Path(source.run_dir), judge_file, store, tmp_path / "runs" / "rejudged")
    assert cfg.tracking.uri == f"sqlite:///{tmp_path}/mlruns.db"  # given here: the source's config never chooses it
    outcome, src = run_rejudge(cfg, Path(source.run_dir), data_root)
    assert _lines(log) == sent  # the subject engine received 0 requests
    assert outcome.metrics["accuracy"] == 1.0 and outcome.metrics["n_judged"] == 6  # as the new judge dictates
    assert outcome.stats["samples_new"] == 6 and src.carried == 0 and src.missing == 0
    new = RunDir(outcome.run_dir)
    stored = new.config()
    assert stored["rejudge"]["source_run"] == str(Path(source.run_dir).resolve())
    assert stored["judge"]["model"] == "lenient" and stored["rejudge"]["source_judge"]["model"] == "harsh"
    recs = ResultStore(Path(outcome.run_dir) / "results").load()
    old = ResultStore(Path(source.run_dir) / "results").load()
    for sid, r in recs.items():  # the subject's outputs are the source's, the judge's are new
        assert r["output"] == old[sid]["output"] and r["outputs"]["answer"] == old[sid]["outputs"]["answer"]
        assert "No" in r["judge_violate"] and "Yes" in old[sid]["judge_violate"]
    # a second rejudge resumes: nothing is sent again
    again, _ = run_rejudge(cfg, Path(source.run_dir), data_root)
    assert again.stats["samples_new"] == 0 and again.metrics["accuracy"] == 1.0 and _lines(log) == sent
    # resuming that run directory under another judge is refused, naming the key (--fresh starts over)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(judge("other", False)))
    cfg_other, _ = rejudge_config(Path(source.run_dir), other, store, tmp_path / "runs" / "rejudged")
    with pytest.raises(ConfigError, match="judge.model: 'lenient' → 'other'"):
        run_rejudge(cfg_other, Path(source.run_dir), data_root)

    # the judge is in the protocol: compare refuses runs of different judges unless asked
    with pytest.raises(ConfigError, match="judge"):
        compare_runs([Path(source.run_dir), Path(outcome.run_dir)])
    assert compare_runs([Path(source.run_dir), Path(outcome.run_dir)], allow_protocol_diff=True).rows

    report = judges_report([Path(source.run_dir), Path(outcome.run_dir)], resamples=300)
    (pair,) = report["pairs"]
    by = {d["decision"]: d for d in pair["agreement"]}
    assert by["violate"]["agreement"] == 0.0 and by["violate"]["n"] == 6 and by["acknowledge"]["agreement"] == 1.0
    assert by["violate"]["confusion"] == [[0, 0], [6, 0]]  # rows A (harsh: true), columns B (lenient: false)
    acc = next(r for r in pair["metrics"] if r["metric"] == "accuracy" and r["setting"] == "all")
    assert acc["diff"] == pytest.approx(1.0)
    res = CliRunner().invoke(_app(register), ["judges", str(source.run_dir), str(outcome.run_dir), "--no-tracking",
                                              "--resamples", "200", "--out", str(tmp_path / "agreement")])
    assert res.exit_code == 0, res.output
    assert "κ [95% CI]" in res.output and "violate" in res.output and "accuracy" in res.output
    assert (tmp_path / "agreement" / "judges.json").is_file()
    assert tables(report)
    # `llmrec compare --allow-protocol-diff` of the two adds the judges' agreement, and the report shows it
    from llmrec.pipelines.results import compare as compare_mod
    from llmrec.pipelines.results.html_report import render

    cmp_dir = tmp_path / "cmp"
    res = CliRunner().invoke(_app(compare_mod.register), ["compare", str(source.run_dir), str(outcome.run_dir),
                                                          "--allow-protocol-diff", "--resamples", "200",
                                                          "--out", str(cmp_dir)])
    assert res.exit_code == 0, res.output
    assert "judge agreement" in res.output and (cmp_dir / "judges.json").is_file()
    html = render([Path(source.run_dir), Path(outcome.run_dir)], [cmp_dir])
    assert "judge agreement: A = " in html and "κ [95% CI]" in html

    # a two-judge jury run stores both judges' verdicts, and `llmrec judges RUN` reads them
    jury_log = tmp_path / "jury_subject.log"
    jury = run_evaluation(load_run_config(_gen_config(tmp_path, "jury.yaml",
                                                      [judge("harsh", True), judge("lenient", False)], jury_log)),
                          data_root)
    recs = ResultStore(Path(jury.run_dir) / "results").load()
    assert all(set(r["jury"]) == {"harsh", "lenient"} for r in recs.values())
    assert jury.metrics["accuracy"] == 0.0  # a 1:1 tie under `tie: strict`: the violation counts
    report = judges_report([Path(jury.run_dir)], resamples=200)
    (pair,) = report["pairs"]
    assert (pair["a"], pair["b"]) == ("harsh", "lenient")
    assert {d["decision"]: d["agreement"] for d in pair["agreement"]}["violate"] == 0.0


def _app(register):
    import typer

    app = typer.Typer()
    register(app)

    @app.command("noop")
    def _noop() -> None:  # a second verb keeps typer's sub-command layout
        pass

    return app


def test_rejudge_refuses_a_run_without_judge_stages(tmp_path, data_root, local_ray):
    from llmrec.pipelines.runner.api import run_evaluation
    from llmrec.pipelines.results.rejudge import rejudge_config
    from llmrec.pipelines.runner.run_config import load_run_config

    mcq = run_evaluation(load_run_config(config(tmp_path, topics=["travel_hotel"], per_topic=1, forms=["explicit"],
                                                turns=[0], methods=["zero-shot"])), data_root)
    judge_file = tmp_path / "j.yaml"
    judge_file.write_text(yaml.safe_dump(judge("x", False)))
    with pytest.raises(ConfigError, match="run none of the judge stages of 'prefeval'"):
        rejudge_config(Path(mcq.run_dir), judge_file)


def test_a_jury_for_a_benchmark_without_jury_fields_is_refused():
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.judges import judging_spec
    from llmrec.pipelines.runner.run_config import RunConfig

    cfg = RunConfig.model_validate({"benchmark": {"name": "gistbench"}, "engine": {"type": "fake"},
                                    "judge": [{"type": "fake", "model": "a"}, {"type": "fake", "model": "b"}]})
    assert [j.model for j in cfg.judging.jurors] == ["b"] and cfg.judge.model == "a"
    with pytest.raises(ConfigError, match="declares no jury_fields"):
        judging_spec(cfg, get_benchmark("gistbench"))


def test_the_judging_spec_is_typed_and_checked_on_the_driver_naming_the_field():
    """The workers get a ``JudgingSpec`` (not a dict to re-parse); a bad value fails where it is built, on the
    driver, before Ray starts, naming the field."""
    from llmrec.pipelines.registry import get_benchmark
    from llmrec.pipelines.runner.judges import JudgingSpec, judging_spec
    from llmrec.pipelines.runner.run_config import JudgingConfig, RunConfig

    cfg = RunConfig.model_validate({"benchmark": {"name": "prefeval", "task": "gen"}, "engine": {"type": "fake"},
                                    "judge": [{"type": "fake", "model": "a"}, {"type": "fake", "model": "b"}],
                                    "judging": {"tie": "first", "seed": 3}})
    spec = judging_spec(cfg, get_benchmark("prefeval"))
    assert isinstance(spec, JudgingSpec) and spec.jury and spec.tie == "first" and spec.seed == 3
    assert spec.roles == ("judge", "judge2") and spec.only is None
    with pytest.raises(Exception):  # frozen: what crosses Ray is what the driver checked
        spec.tie = "strict"
    # a judging section that skipped validation (built in code): the spec refuses it naming each field
    cfg.judging = JudgingConfig.model_construct(temperature=-1.0, seed=0, tie="lenient", jurors=cfg.judging.jurors)
    with pytest.raises(ConfigError) as e:
        judging_spec(cfg, get_benchmark("prefeval"))
    msg = str(e.value)
    assert "judging of benchmark 'prefeval'" in msg and "temperature:" in msg and "-1.0" in msg
    assert "tie:" in msg and "'lenient'" in msg
    with pytest.raises(Exception, match="2 label"):
        JudgingSpec(roles=("judge",), labels=("a", "b"))


def test_gistbench_judged_decisions_are_evidence_and_specificity_choices():
    from llmrec.pipelines.registry import get_benchmark

    bench = get_benchmark("gistbench")
    cfg = bench.config_cls.model_validate({"name": "gistbench"})
    row = {"interests": [{"interest": "jazz", "item_ids": ["o1", "o2", "o3"]}],
           "judge": {"jazz": {"answer": ["o1", "o3"], "state": "ok"}, "never": {"answer": None, "state": "missed"}},
           "specificity": {"jazz": {"answer": ["t2"], "test_ids": ["t1", "t2"], "state": "ok"}}}
    got = {(d.decision, d.unit): d.label for d in bench.judge_decisions(cfg, row)}
    assert got == {("evidence", "jazz|o1"): True, ("evidence", "jazz|o2"): False, ("evidence", "jazz|o3"): True,
                   ("specificity", "jazz|t1"): False, ("specificity", "jazz|t2"): True}
    assert bench.judge_stages == ("judge", "specificity") and bench.jury_fields is None


@pytest.mark.parametrize("verb", ["rejudge", "judges"])
def test_verbs_are_mounted_with_help(verb):
    from llmrec.cli import EXTRA_VERBS
    from llmrec.pipelines.results.judges_cli import register

    assert "llmrec.pipelines.results.judges_cli" in EXTRA_VERBS
    res = CliRunner().invoke(_app(register), [verb, "--help"])
    assert res.exit_code == 0 and "Usage" in res.output
