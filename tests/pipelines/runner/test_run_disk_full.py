"""A disk that fills while a run writes its files (samples.parquet, plots) ends `llmrec run` with one line naming
the file and saying why, never a traceback; the answers stay in the result store, so a re-run resumes them.

Every sample's answer is put in the run's result store first (as a run that stopped after the samples leaves it),
so `llmrec run` goes straight to writing its files: no Ray, fast tier. The full disk is simulated (an ``OSError``
with ``ENOSPC`` and no file name, as write(2) gives it): no small file system is mounted."""

from __future__ import annotations

import errno

import yaml
from typer.testing import CliRunner

from llmrec.cli import app
from llmrec.pipelines.runner.execution import plan
from llmrec.pipelines.runner.run_config import RunConfig
from tests.pipelines.toy.benchmark import BENCHMARK, NAME


def _answered(tmp_path) -> str:
    raw = {"benchmark": {"name": NAME, "n": 3, "rounds": 0}, "engine": {"type": "fake", "default": "yes"},
           "output": {"dir": str(tmp_path / "runs"), "run_name": "full"}, "tracking": {"enabled": False}}
    p = plan(RunConfig.model_validate(raw))
    p.store.write([{**s, "status": "ok", "error": None, "answer": "yes", "correct": True}
                    for s in p.samples])
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _run(path: str):
    res = CliRunner().invoke(app, ["run", path])
    return res, " ".join(res.output.split())


def test_a_full_disk_while_the_run_writes_its_files_is_one_line_naming_the_file(tmp_path, monkeypatch):
    from llmrec.pipelines.runner import report

    path, run_dir = _answered(tmp_path), tmp_path / "runs" / "full"
    with monkeypatch.context() as m:
        m.setattr(report.pq, "write_table", _full)
        res, text = _run(path)
    assert res.exit_code != 0 and isinstance(res.exception, SystemExit), (res.output, res.exception)
    assert f"error: {run_dir / 'samples.parquet'}: cannot write: no space left on the device" in text, text
    assert "finished samples are kept" in text

    with monkeypatch.context() as m:
        m.setattr(type(BENCHMARK), "plots", lambda self, *a: _full())
        res, text = _run(path)
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert f"error: {run_dir / 'plots'}: cannot write the plots: no space left on the device" in text, text

    res, text = _run(path)  # space again: the stored answers are taken, nothing is asked again
    assert res.exit_code == 0, res.output
    assert (run_dir / "samples.parquet").is_file() and (run_dir / "metrics.json").is_file()
