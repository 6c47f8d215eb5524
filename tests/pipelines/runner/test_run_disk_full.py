"""A disk that fills while a run writes its files (samples.parquet, plots) ends the run with one line naming the
file and saying why, never a traceback; the answers stay in the result store, so a re-run resumes them."""

from __future__ import annotations

import errno

import yaml
from typer.testing import CliRunner

from llmrec.cli import app
from tests.pipelines.toy.benchmark import BENCHMARK, NAME


def _config(tmp_path) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({
        "benchmark": {"name": NAME, "n": 3, "rounds": 0}, "engine": {"type": "fake", "default": "yes"},
        "execution": {"backoff_s": 0.01, "retries": 0}, "ray": {"num_cpus": 2},
        "output": {"dir": str(tmp_path / "runs"), "run_name": "full"}, "tracking": {"enabled": False}}))
    return str(path)


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # as write(2) gives it: no file name


def test_a_full_disk_while_the_run_writes_its_files_is_one_line_naming_the_file(tmp_path, local_ray, monkeypatch):
    from llmrec.pipelines.runner import report

    run_dir = tmp_path / "runs" / "full"
    with monkeypatch.context() as m:
        m.setattr(report.pq, "write_table", _full)  # the driver's samples.parquet; the workers' shards are written
        res = CliRunner().invoke(app, ["run", _config(tmp_path)])
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    text = " ".join(res.output.split())
    assert f"error: {run_dir / 'samples.parquet'}: cannot write: no space left on the device" in text, text
    assert "finished samples are kept" in text

    with monkeypatch.context() as m:
        m.setattr(type(BENCHMARK), "plots", lambda self, *a: _full())
        res = CliRunner().invoke(app, ["run", _config(tmp_path)])
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    text = " ".join(res.output.split())
    assert f"error: {run_dir / 'plots'}: cannot write the plots: no space left on the device" in text, text

    res = CliRunner().invoke(app, ["run", _config(tmp_path), "-v"])  # space again: nothing is asked again
    assert res.exit_code == 0, res.output
    assert (run_dir / "samples.parquet").is_file() and (run_dir / "metrics.json").is_file()
    assert "3 already in the store, 0 to run" in res.output, res.output
