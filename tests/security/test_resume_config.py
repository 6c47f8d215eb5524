"""Issue 22: a run directory's results are resumed only under the config that produced them
(the settings that determine answers); ``--fresh`` starts over."""

from __future__ import annotations


import pytest
from typer.testing import CliRunner
import yaml

from llmrec.cli import app
from llmrec.errors import ConfigError
from llmrec.pipelines.runner.execution import plan
from llmrec.pipelines.runner.run_config import RunConfig
from tests.pipelines.toy.benchmark import NAME


def raw(tmp_path, engine=None, **sections) -> dict:
    return {"benchmark": {"name": NAME, "n": 3}, "engine": engine or {"type": "fake", "default": "yes"},
            "output": {"dir": str(tmp_path / "runs"), "run_name": "shared", **sections.pop("output", {})},
            "tracking": {"enabled": False}, **sections}


def cfg(tmp_path, engine=None, **sections) -> RunConfig:
    return RunConfig.model_validate(raw(tmp_path, engine, **sections))


def finish_one(tmp_path) -> None:
    first = plan(cfg(tmp_path))
    first.store.write([{**first.samples[0], "status": "ok", "error": None, "answer": "yes"}])
    (first.run_dir.local_path / "mlflow_run_id").write_text("old-run")


def test_another_engine_under_the_same_run_name_is_not_resumed(tmp_path):
    finish_one(tmp_path)
    with pytest.raises(ConfigError, match=r"(?s)produced under a different config.*engine.default: 'yes' → 'no'"
                                          r".*--fresh"):
        plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}))
    with pytest.raises(ConfigError, match=r"engine.type: 'fake' → 'openai'"):
        plan(cfg(tmp_path, engine={"type": "openai", "model": "m"}))
    resolved = yaml.safe_load((tmp_path / "runs" / "shared" / "resolved.yaml").read_text())
    assert resolved["engine"]["default"] == "yes"  # still the config the stored answers came from


def test_a_run_whose_every_sample_failed_may_continue_under_a_fixed_engine(tmp_path):
    first = plan(cfg(tmp_path))
    first.store.write([{**s, "status": "failed", "error": "unreachable"} for s in first.samples])
    (tmp_path / "runs" / "shared" / "mlflow_run_id").write_text("old-run")
    fixed = plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}))  # nothing would be resumed: no mixing
    assert len(fixed.pending) == 3
    assert not (tmp_path / "runs" / "shared" / "mlflow_run_id").exists()  # its own MLflow run, its own params


def test_knobs_that_do_not_change_answers_still_resume(tmp_path):
    finish_one(tmp_path)
    p = plan(cfg(tmp_path, execution={"concurrency": 2, "batch_size": 1}, ray={"num_cpus": 1},
                 output={"cache": False}))
    assert len(p.pending) == 2


def test_fresh_starts_over_under_the_new_config(tmp_path):
    finish_one(tmp_path)
    p = plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}, output={"resume": False}))
    assert len(p.pending) == 3 and not p.store.shards()
    assert not (tmp_path / "runs" / "shared" / "mlflow_run_id").exists()  # a new MLflow run, not the old one's params
    resolved = yaml.safe_load((tmp_path / "runs" / "shared" / "resolved.yaml").read_text())
    assert resolved["engine"]["default"] == "no"


def test_a_judge_added_or_an_option_of_another_version_is_compared_sensibly(tmp_path):
    from llmrec.pipelines.runner.run_config import resume_conflicts

    stored = yaml.safe_dump(cfg(tmp_path).model_dump(mode="json"))
    judged = cfg(tmp_path, judge={"type": "fake"})
    assert resume_conflicts(judged, stored) == ["judge: None → a mapping"]
    old = yaml.safe_load(stored)
    del old["engine"]["delay_s"]  # a key the older llmrec did not have: not a difference
    assert resume_conflicts(cfg(tmp_path), yaml.safe_dump(old)) == []


def test_llmrec_run_names_the_differing_keys_in_one_message(tmp_path):
    finish_one(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw(tmp_path, {"type": "fake", "default": "no"})))
    out = CliRunner().invoke(app, ["run", str(path)])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "engine.default: 'yes' → 'no'" in out.output and "--fresh" in out.output


# ---- results belong to the config and the data that made them -------------------------------------------------

def test_results_without_their_resolved_yaml_are_refused_not_resumed(tmp_path):
    finish_one(tmp_path)
    run_dir = tmp_path / "runs" / "shared"
    (run_dir / "resolved.yaml").unlink()
    for engine in ({"type": "fake", "default": "no"}, None):  # another engine, or even the same: nothing says
        with pytest.raises(ConfigError, match=r"results without the config that made them: .*--fresh"):
            plan(cfg(tmp_path, engine=engine))
    assert not (run_dir / "resolved.yaml").exists()  # not rewritten to claim the new config
    assert len(plan(cfg(tmp_path, output={"resume": False})).pending) == 3  # --fresh starts over


def test_a_result_shard_copied_from_another_run_is_refused_naming_it(tmp_path):
    other = plan(cfg(tmp_path, engine={"type": "fake", "default": "no"}, output={"run_name": "other"}))
    shard = other.store.write([{**other.samples[1], "status": "ok", "error": None, "answer": "no"}])
    finish_one(tmp_path)
    results = tmp_path / "runs" / "shared" / "results"
    (results / shard).write_bytes((tmp_path / "runs" / "other" / "results" / shard).read_bytes())
    with pytest.raises(ConfigError, match=rf"(?s)results/{shard}: .*another config.*engine.default: 'no' → 'yes'"):
        plan(cfg(tmp_path))


def test_a_shard_without_a_fingerprint_is_refused(tmp_path):
    from llmrec.pipelines.common.store import ResultStore

    first = plan(cfg(tmp_path))
    shard = ResultStore(tmp_path / "runs" / "shared" / "results").write(  # no provenance: copied in, or old
        [{**first.samples[0], "status": "ok", "error": None, "answer": "yes"}])
    with pytest.raises(ConfigError, match=rf"{shard}: a result shard without the fingerprint"):
        plan(cfg(tmp_path))


def _questions(folder, *lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "questions.txt").write_text("\n".join(lines) + "\n")
    return {"dir": str(folder)}


def test_another_data_dir_with_other_questions_is_refused(tmp_path):
    data = _questions(tmp_path / "a", "what is 1+1?", "what is 2+2?", "what is 3+3?")
    bench = {"name": NAME, "n": 3, "questions": "questions.txt"}
    first = plan(cfg(tmp_path, benchmark=bench, data=data))
    first.store.write([{**first.samples[0], "status": "ok", "error": None, "answer": "yes"}])
    other = _questions(tmp_path / "b", "who wrote Faust?", "what is 2+2?", "what is 3+3?")
    with pytest.raises(ConfigError, match=r"(?s)other data.*data: questions.txt: other content.*--fresh"):
        plan(cfg(tmp_path, benchmark=bench, data=other))
    same = tmp_path / "copy"  # the same data in another folder: the same results
    same.mkdir()
    (same / "questions.txt").write_bytes((tmp_path / "a" / "questions.txt").read_bytes())
    assert len(plan(cfg(tmp_path, benchmark=bench, data={"dir": str(same)})).pending) == 2
    (tmp_path / "a" / "questions.txt").write_text("edited\nin\nplace\n")  # same path, same size class: new content
    with pytest.raises(ConfigError, match=r"data: questions.txt: other content"):
        plan(cfg(tmp_path, benchmark=bench, data=data))


def test_data_hashes_are_cached_by_path_size_and_mtime(tmp_path, monkeypatch):
    from llmrec.pipelines.common import provenance

    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "big.bin"
    f.write_bytes(b"x" * 1000)
    hashed = []
    real = provenance.sha256_of
    monkeypatch.setattr(provenance, "sha256_of", lambda p: hashed.append(p) or real(p))
    one = provenance.data_fingerprint({str(f)}, tmp_path)
    assert provenance.data_fingerprint({str(f)}, tmp_path) == one == {"big.bin": real(str(f))}
    assert len(hashed) == 1  # the second run reads the cache
    f.write_bytes(b"y" * 1000)
    assert provenance.data_fingerprint({str(f)}, tmp_path) != one and len(hashed) == 2


def test_the_request_cache_tells_servers_apart():
    from llmrec.serving.cache import cache_key
    from llmrec.serving.engine import build_engine
    from llmrec.types import Message, Request

    req = Request(messages=[Message(role="user", content="hi")])
    here = build_engine({"type": "openai", "model": "m", "base_url": "http://10.0.0.1:8000/v1"})
    there = build_engine({"type": "openai", "model": "m", "base_url": "http://10.0.0.2:8000/v1"})
    assert cache_key(here.identity(), req) != cache_key(there.identity(), req)
    secret = build_engine({"type": "openai", "model": "m", "base_url": "http://u:pw@10.0.0.1:8000/v1"})
    assert "pw" not in str(secret.identity())


# ---- config errors before any work ------------------------------------------------------------------------------

def _run_yaml(tmp_path, text: str):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_an_empty_slice_is_an_error_naming_the_key(tmp_path):
    from llmrec.pipelines.runner.run_config import load_run_config

    path = _run_yaml(tmp_path, "benchmark: {name: prefeval, turns: []}\nengine: {type: fake}\n")
    with pytest.raises(ConfigError, match=r"benchmark.turns'.*at least 1 item"):
        load_run_config(path)
    out = CliRunner().invoke(app, ["run", str(path)])
    assert out.exit_code == 2 and "benchmark.turns" in out.output and "Traceback" not in out.output


def test_a_duplicate_yaml_key_is_an_error_naming_file_line_and_key(tmp_path):
    from llmrec.config import read_yaml

    path = _run_yaml(tmp_path, "engine:\n  type: fake\n  default: 'yes'\n  default: 'no'\n")
    with pytest.raises(ConfigError, match=rf"{path}, line 4, column 3: .*duplicate key 'default' "
                                          r"\(first given at line 3\)"):
        read_yaml(path)
    base = _run_yaml(tmp_path, "a: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n")  # a merge key's override is not a duplicate
    assert read_yaml(base)["c"] == {"x": 2}


def test_a_template_without_its_placeholders_is_refused_at_validation(tmp_path):
    from llmrec.pipelines.registry import benchmark_config

    bad = tmp_path / "mcq.txt"
    bad.write_text("Pick one: {options}\n")
    with pytest.raises(Exception, match=r"templates.mcq_question: .*mcq.txt lacks the placeholder\(s\) \{question\}"):
        benchmark_config({"name": "prefeval", "templates": {"mcq_question": str(bad)}})
    path = _run_yaml(tmp_path, f"benchmark: {{name: prefeval, templates: {{mcq_question: {bad}}}}}\n"
                               "engine: {type: fake}\n")
    out = CliRunner().invoke(app, ["run", str(path)])
    assert out.exit_code == 2 and "{question}" in out.output and "Traceback" not in out.output
    good = tmp_path / "ok.txt"
    good.write_text("{question}\n{options}\n{reminder}")
    assert benchmark_config({"name": "prefeval", "templates": {"mcq_question": str(good)}})


# ---- training: a checkpoint belongs to the config that trained it -----------------------------------------------

def _train_config(tmp_path, **train) -> str:
    import pandas as pd

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    rows = [(f"u{u}", f"i{(u * 7 + t) % 30}", 1.0, t) for u in range(24) for t in range(8)]
    pd.DataFrame(rows, columns=["uid", "iid", "r", "ts"]).to_csv(data / "inter.csv", index=False)
    cfg = {"data": {"format": "csv", "path": "inter.csv", "dir": str(data),
                    "columns": {"user_id": "uid", "item_id": "iid", "rating": "r", "timestamp": "ts"}},
           "split": {"protocol": "random", "ratios": [0.8, 0.1, 0.1], "seed": 1},
           "model": {"name": "bprmf", "embedding_size": 8},
           "train": {"epochs": 1, "batch_size": 64, "learning_rate": 0.05, "num_threads": 1, "device": "cpu",
                     "progress": False, "eval": {"topk": [5, 10]}, **train},
           "tracking": {"enabled": False}, "output": {"dir": str(tmp_path / "runs"), "run_name": "bpr"}}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_train_resume_under_another_split_or_model_is_refused_naming_the_keys(tmp_path):
    from llmrec.tuning.api import train_from_config

    path = _train_config(tmp_path)
    train_from_config(path, [])
    for change, key in (("split.seed=2", r"split.seed: 1 → 2"), ("train.learning_rate=0.1", r"train.learning_rate"),
                        ("model.embedding_size=16", r"model.embedding_size: 8 → 16")):
        with pytest.raises(ConfigError, match=rf"(?s)--resume: .*trained under a different config.*{key}.*--fresh"):
            train_from_config(path, [change], resume=True)
    assert train_from_config(path, ["train.epochs=2"], resume=True)["best_epoch"] in (0, 1)  # more epochs: same run


def test_train_without_resume_does_not_overwrite_a_trained_run(tmp_path):
    from llmrec.tuning.api import train_from_config

    path = _train_config(tmp_path)
    train_from_config(path, [])
    metrics = (tmp_path / "runs" / "bpr" / "metrics.json").read_text()
    out = CliRunner().invoke(app, ["train", path, "--set", "split.seed=3"])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "already holds a trained run" in out.output and "--resume" in out.output and "--fresh" in out.output
    assert (tmp_path / "runs" / "bpr" / "metrics.json").read_text() == metrics
    out = CliRunner().invoke(app, ["train", path, "--set", "split.seed=3", "--fresh"])
    assert out.exit_code == 0, out.output
    assert yaml.safe_load((tmp_path / "runs" / "bpr" / "resolved.yaml").read_text())["split"]["seed"] == 3


def test_a_real_run_then_llmrec_run_on_other_questions_is_refused(tmp_path, local_ray):
    """The whole runner (local Ray, fake engine): a finished run's answers are not taken for other questions."""
    from llmrec.pipelines.runner.api import run_evaluation

    data = _questions(tmp_path / "a", "what is 1+1?", "what is 2+2?", "what is 3+3?")
    bench = {"name": NAME, "n": 3, "questions": "questions.txt", "rounds": 0}
    done = run_evaluation(cfg(tmp_path, benchmark=bench, data=data, ray={"num_cpus": 2},
                              execution={"backoff_s": 0.01, "retries": 0}))
    assert done.metrics["n_samples"] == 3
    other = raw(tmp_path, benchmark=bench, data=_questions(tmp_path / "b", "who wrote Faust?", "2+2?", "3+3?"))
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(other))
    out = CliRunner().invoke(app, ["run", str(path)])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "data: questions.txt: other content" in out.output and "--fresh" in out.output
