"""Every verb ends the same way: one `error: …` line (plain text, never Rich markup) and a documented
exit code, from one handler (llmrec.exits) instead of a try/except in each verb."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from llmrec.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _text(res) -> str:
    return " ".join(res.output.split())


def test_help_documents_the_exit_codes():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0 and "Exit codes: 0 success; 1 the work ran" in _text(res)


def test_every_verb_goes_through_one_handler():
    from llmrec.exits import ErrorsToExitCodes

    assert isinstance(typer.main.get_command(app), ErrorsToExitCodes)
    modules = ["llmrec/cli.py", "tuning/sft/cli.py", "cluster/jobs_cli.py", "pipelines/baselines/cli.py",
               "pipelines/runner/plan_cli.py", *map(str, (ROOT / "pipelines/benchmarks").glob("*/cli.py"))]
    for m in modules:
        src = (ROOT / m).read_text()
        assert "except LlmrecError as" not in src and "def _fail" not in src and "Exit(2)" not in src, m


def test_markup_like_text_in_an_error_is_printed_as_is(tmp_path):
    cfg = tmp_path / "c[/x].yaml"
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2
    assert f"error: Config file not found: {cfg}" in _text(res)


def test_yaml_syntax_error_keeps_line_column_and_caret(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("benchmark: {name: prefeval}\nengine: {type: fake\nexecution: {}\n")
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2
    assert f"{cfg}, line 3, column 10: not valid YAML" in res.output
    snippet = res.output.split("\n")
    caret = next(i for i, line in enumerate(snippet) if line.strip() == "^")
    assert "execution: {}" in snippet[caret - 1]


def test_non_utf8_config_and_predictions_name_file_and_offset(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(b"benchmark: {name: prefeval}\nengine: {type: fake, default: \"caf\xe9\"}\n")
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2
    assert f"{cfg}: not UTF-8 text: byte 0xe9 at offset 62 (line 2" in _text(res)
    p = tmp_path / "p.jsonl"
    p.write_bytes(b'{"sample_id": "a", "gold": "A", "output": "\xff"}\n')
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p)])
    assert res.exit_code == 2 and f"{p}: not UTF-8 text: byte 0xff at offset 43 (line 1" in _text(res)
    p.write_text(json.dumps({"user_id": "u", "target": 1, "candidates": [1], "ranked": [1], "history_len": 1}))
    items = tmp_path / "items.jsonl"  # a data file the task reads
    items.write_bytes(b'{"n_users": 3}\n{"item_id": 1, "train_freq": 2, "categories": ["Fran\xe7ais"]}\n')
    res = runner.invoke(app, ["score", "beyond-utility", "--predictions", str(p), "--items", str(items), "--k", "1"])
    assert res.exit_code == 2 and f"{items}: not UTF-8 text: byte 0xe7 at offset 67 (line 2" in _text(res)


def test_score_out_must_be_a_file(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"sample_id": "a", "gold": "A", "output": "A"}) + "\n")
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p), "--out", str(tmp_path)])
    assert res.exit_code == 2 and f"--out {tmp_path} is a directory" in _text(res)


def test_runs_refuses_a_store_that_does_not_exist(tmp_path):
    typo = tmp_path / "mlrun.db"
    res = runner.invoke(app, ["runs", "--tracking-uri", f"sqlite:///{typo}"])
    assert res.exit_code == 2 and f"no MLflow store at {typo}" in _text(res)
    assert not typo.exists()  # a typo never creates a new, empty store
    res = runner.invoke(app, ["ui", "--tracking-uri", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no MLflow store at" in _text(res)


def test_plan_without_data_prints_the_data_error(tmp_path, monkeypatch):
    from llmrec.cli import _mount_extra_verbs
    from tests.serving.test_vllm_planning import LLAMA_8B

    if not any(c.name == "plan" for c in app.registered_commands):
        _mount_extra_verbs()
    monkeypatch.delenv("LLMREC_DATA_DIR", raising=False)
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(json.dumps({
        "benchmark": {"name": "prefeval", "task": "mcq"},
        "engine": {"type": "vllm", "model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 8192,
                   "model_config_path": str(tmp_path / "config.json")},
        "data": {"dir": str(tmp_path / "no-data")}, "execution": {"num_gpus_per_worker": 1}}))
    res = runner.invoke(app, ["plan", str(cfg)])
    assert res.exit_code == 2 and res.output.startswith("error: ") and "no-data" in _text(res)
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit)


def test_run_exit_code_follows_the_failed_share(monkeypatch, tmp_path):
    """Results are stored either way; the exit code and the error summary follow the failed share."""
    from llmrec.pipelines.runner import api
    from llmrec.pipelines.runner.failures import summarize_failures

    rows = ([{"status": "failed", "failed_stage": "answer", "error": "HTTP 400: unknown field [/x]"}] * 3
            + [{"status": "failed", "failed_stage": "judge", "error": "timeout"}]
            + [{"status": "ok"}] * 6)

    def fake_run(cfg, data_dir, progress):
        return api.RunOutcome(tmp_path, {"accuracy": 1.0}, {}, None, summarize_failures(rows))

    monkeypatch.setattr(api, "run_evaluation", fake_run)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("benchmark: {name: prefeval}\nengine: {type: fake}\n")
    res = runner.invoke(app, ["run", str(cfg)])  # 4 of 10 failed > 0.1
    assert res.exit_code == 1
    text = _text(res)
    assert "4 of 10 samples failed (40%; execution.max_failed_share is 0.1)" in text
    assert re.search(r"\[answer\] HTTP 400: unknown field \[/x\] \(3 samples\) \[judge\] timeout \(1 sample\)", text)
    assert runner.invoke(app, ["run", str(cfg), "--max-failed-share", "0.5"]).exit_code == 0
    rows[:] = [{"status": "failed", "failed_stage": "answer", "error": "refused"}] * 2
    res = runner.invoke(app, ["run", str(cfg), "--max-failed-share", "1"])  # everything failed: always 1
    assert res.exit_code == 1 and "2 of 2 samples failed" in _text(res)


@pytest.mark.parametrize("rows, exceeds", [
    ([], False), ([{"status": "over_context"}], False), ([{"status": "ok"}, {"status": "failed"}], True),
])
def test_failure_summary(rows, exceeds):
    from llmrec.pipelines.runner.failures import summarize_failures

    assert summarize_failures(rows).exceeds(0.1) is exceeds


def test_score_out_that_is_the_predictions_file_is_refused(tmp_path):
    p = tmp_path / "p.jsonl"
    line = json.dumps({"sample_id": "a", "gold": "A", "output": "A"}) + "\n"
    p.write_text(line)
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p), "--out", str(p)])
    assert res.exit_code == 2 and f"--out {p}: is the input file {p} itself" in _text(res), res.output
    assert p.read_text() == line  # the predictions are untouched
    (tmp_path / "link.jsonl").symlink_to(p)  # the same file under another name
    res = runner.invoke(app, ["score", "prefeval-mcq", "--predictions", str(p), "--out", str(tmp_path / "link.jsonl")])
    assert res.exit_code == 2 and p.read_text() == line


def test_report_out_over_a_run_directory_results_file_is_refused(tmp_path):
    from llmrec.cli import _mount_extra_verbs

    _mount_extra_verbs()
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text('{"accuracy": 1.0}')
    res = runner.invoke(app, ["report", str(run), "--out", str(run / "metrics.json")])
    assert res.exit_code == 2 and "would overwrite the results file metrics.json" in _text(res), res.output
    assert (run / "metrics.json").read_text() == '{"accuracy": 1.0}'


def test_an_error_raised_inside_a_ray_worker_is_one_line():
    """An LlmrecError raised in an actor or task comes back wrapped by Ray (RayTaskError, its cause): the one
    handler prints the original's message, not Ray's traceback."""
    from llmrec.errors import DataError, wrapped_llmrec_error

    class RayTaskLike(Exception):
        def __init__(self, cause):
            super().__init__("Traceback (most recent call last): ... long")
            self.cause = cause

    inner = DataError("request cache /x/c.sqlite: cannot write: database or disk is full")
    outer = RuntimeError("UserCodeException")
    outer.__cause__ = RayTaskLike(inner)
    assert wrapped_llmrec_error(outer) is inner
    assert wrapped_llmrec_error(RuntimeError("plain")) is None


def test_an_error_ray_data_hands_back_as_text_is_its_message():
    """Ray Data keeps only the text of a batch function's exception (UserCodeException, cause lost): the
    message of the llmrec error in that remote traceback is what is printed, as a run failure (exit 1)."""
    from llmrec.errors import EXIT_FAILED, wrapped_llmrec_error

    remote = type("RayTaskError(UserCodeException)", (Exception,), {"__module__": "ray.exceptions"})
    text = ("UDF failed to process a data block.\nTraceback (most recent call last):\n  File \"w.py\", line 3\n"
            "llmrec.serving.cache_service.CacheError: request cache /r/c.sqlite: cannot write: database or disk is "
            "full (free space or fix the folder and re-run, finished samples are kept; or run with --no-cache)\n")
    found = wrapped_llmrec_error(remote(text))
    assert str(found).startswith("request cache /r/c.sqlite: cannot write: database or disk is full")
    assert found.exit_code == EXIT_FAILED
