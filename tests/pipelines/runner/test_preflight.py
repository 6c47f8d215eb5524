"""`llmrec run` fails before its first sample, in one line naming the key, variable, path or store, when the
run could not finish: an unreachable or invalid tracking store, an unset API key variable, an output folder that
cannot hold the run, a run name too long for a folder, a data folder that is not there. Nothing is written to the
run directory and no Ray is started in any of these."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from llmrec.cli import app
from tests.pipelines.toy.benchmark import NAME

runner = CliRunner()


def toy_config(tmp_path: Path, **sections) -> Path:
    data = {"benchmark": {"name": NAME, "n": 2, "rounds": 0},
            "engine": {"type": "fake", "context_length": 60, "default": "yes"},
            "execution": {"batch_size": 2, "backoff_s": 0.01, "retries": 1}, "ray": {"num_cpus": 1},
            "output": {"dir": str(tmp_path / "runs")},
            "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art")}}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args: str):
    t0 = time.perf_counter()
    res = runner.invoke(app, ["run", *map(str, args)])
    return res, " ".join(res.output.split()), time.perf_counter() - t0


def no_work_done(tmp_path: Path) -> bool:
    return not list((tmp_path / "runs").glob("*/results")) and not list((tmp_path / "runs").glob("*/resolved.yaml"))


def test_unreachable_tracking_server_fails_in_seconds_before_the_work(tmp_path):
    res, text, took = run(toy_config(tmp_path), "--set", f"tracking.uri=http://127.0.0.1:{closed_port()}")
    assert res.exit_code == 2, res.output
    assert "error: tracking store http://127.0.0.1:" in text and "cannot be used" in text
    assert "Traceback" not in res.output and took < 30 and no_work_done(tmp_path)


@pytest.mark.parametrize("uri", ["foo://x", "sqlite:///{tmp}/no/such/folder/m.db", "sqlite:///{tmp}/afile/m.db"])
def test_invalid_tracking_uri_fails_before_the_work(tmp_path, uri):
    (tmp_path / "afile").write_text("x")  # a file where the store's folder should be
    res, text, _ = run(toy_config(tmp_path), "--set", f"tracking.uri={uri.format(tmp=tmp_path)}")
    assert res.exit_code == 2 and "error: tracking store" in text and "Traceback" not in res.output, res.output
    assert no_work_done(tmp_path)


def test_unset_api_key_variable_fails_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.delenv("LLMREC_TEST_NO_SUCH_KEY", raising=False)
    cfg = toy_config(tmp_path, engine={"type": "openai", "model": "m", "base_url": f"http://127.0.0.1:{closed_port()}/v1",
                                       "api_key_env": "LLMREC_TEST_NO_SUCH_KEY"})
    data = yaml.safe_load(cfg.read_text())
    data["engine"] = {k: v for k, v in data["engine"].items() if k in ("type", "model", "base_url", "api_key_env")}
    cfg.write_text(yaml.safe_dump(data))
    res, text, _ = run(cfg)
    assert res.exit_code == 2, res.output
    assert "engine.api_key_env: the environment variable LLMREC_TEST_NO_SUCH_KEY is not set" in text
    assert no_work_done(tmp_path)


def test_output_dir_that_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    res, text, _ = run(toy_config(tmp_path), "--set", f"output.dir={tmp_path / 'afile'}")
    assert res.exit_code == 2 and f"output.dir {tmp_path / 'afile'}: is a file, not a folder" in text, res.output
    assert (tmp_path / "afile").read_text() == "x"


def test_output_dir_under_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    res, text, _ = run(toy_config(tmp_path), "--set", f"output.dir={tmp_path / 'afile' / 'runs'}")
    assert res.exit_code == 2 and f"{tmp_path / 'afile' / 'runs'}" in text and "Traceback" not in res.output


def test_empty_output_dir_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res, text, _ = run(toy_config(tmp_path), "--set", "output.dir=")
    assert res.exit_code == 2 and "'output.dir': Value error, must name a folder or a storage URI" in text, text
    assert not list(tmp_path.glob("*/results"))  # nothing written into the working directory


def test_run_name_longer_than_a_folder_name(tmp_path):
    res, text, _ = run(toy_config(tmp_path), "--set", f"output.run_name={'r' * 300}")
    assert res.exit_code == 2 and "'output.run_name'" in text and "300 bytes long" in text, text
    assert "Errno 36" not in text and no_work_done(tmp_path)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_data_dir_naming_no_folder_is_an_error_not_a_fallback(tmp_path, monkeypatch, kind):
    """$LLMREC_DATA_DIR holds the benchmark's data; an explicit --data-dir / data.dir that is not a folder with it
    is refused, never read around."""
    from tests.pipelines.conftest import config

    real = tmp_path / "real"
    (real / "prefeval" / "benchmark_dataset").mkdir(parents=True)
    (real / "prefeval" / "benchmark_dataset" / "filtered_inter_turns.json").write_text("{}")
    monkeypatch.setenv("LLMREC_DATA_DIR", str(real))
    given = tmp_path / "given"
    if kind == "file":
        given.write_text("not a folder")
    cfg = config(tmp_path)
    word = "does not exist" if kind == "missing" else "is a file, not a folder"
    res, text, _ = run(cfg, "--data-dir", given)
    assert res.exit_code == 2 and f"data folder {given} (--data-dir / data.dir) {word}" in text, res.output
    res, text, _ = run(cfg, "--set", f"data.dir={given}")
    assert res.exit_code == 2 and f"data folder {given} (--data-dir / data.dir) {word}" in text, res.output
    assert no_work_done(tmp_path)


def test_data_dir_without_the_benchmark_files_is_an_error(tmp_path, monkeypatch):
    from tests.pipelines.conftest import config

    monkeypatch.setenv("LLMREC_DATA_DIR", str(tmp_path))
    (tmp_path / "empty").mkdir()
    res, text, _ = run(config(tmp_path), "--data-dir", tmp_path / "empty")
    assert res.exit_code == 2 and f"prefeval data not found in {tmp_path / 'empty'}" in text, res.output
