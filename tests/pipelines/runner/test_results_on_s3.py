"""`llmrec leaderboard`, `report` and `compare` read run and suite directories from a storage URI (a real S3 API:
a moto server on 127.0.0.1): each is copied fresh into a temporary folder, and a suite's entries recorded as
URIs are found in the copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmrec.cli import _mount_extra_verbs, app
from tests.pipelines.results_fixtures import suite_dir
from tests.pipelines.runner.test_compare import fake_run
from tests.runtime.helpers import s3_server

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _upload(local: Path, bucket: str, prefix: str) -> str:
    import boto3

    s3 = boto3.client("s3")
    for f in local.rglob("*"):
        if f.is_file():
            s3.upload_file(str(f), bucket, f"{prefix}/{f.relative_to(local)}")
    return f"s3://{bucket}/{prefix}"


@pytest.fixture()
def cli():
    if not any(c.name == "leaderboard" for c in app.registered_commands):
        _mount_extra_verbs()
    return lambda args: CliRunner().invoke(app, args)


def test_leaderboard_report_and_compare_of_runs_on_s3(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    with s3_server() as bucket:
        s = suite_dir(tmp_path / "local", comparison=False)
        index = json.loads((s / "suite.json").read_text())
        for e in index["entries"]:  # as a suite run with output.dir=s3://… records them
            e["run_dir"] = f"s3://{bucket}/suites/demo_suite/{e['subject']}/{e['entry']}"
        (s / "suite.json").write_text(json.dumps(index))
        uri = _upload(s, bucket, "suites/demo_suite")

        res = cli(["leaderboard", uri, "--no-tracking"])
        assert res.exit_code == 0, res.output
        md = (tmp_path / "leaderboard" / "leaderboard.md").read_text()  # remote suite: written here
        assert "| gemma-b | llm | 0.123 [0.010, 0.200] n=1† | 0.583 [0.383, 0.783] n=5† |" in md
        assert "| user-average | baseline |" in md

        res = cli(["report", uri, "--out", str(tmp_path / "report.html")])
        assert res.exit_code == 0, res.output
        html = (tmp_path / "report.html").read_text()
        assert "gemma-a" in html and "user-average" in html and "Where should I stay?" in html

        a = _upload(Path(fake_run(tmp_path, "base", "no")), bucket, "runs/base")
        b = _upload(Path(fake_run(tmp_path, "better", "yes", wrong=(9,))), bucket, "runs/better")
        res = cli(["compare", a, b, "--resamples", "200"])  # remote runs: written to ./comparisons/<a>--vs--<b>
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / "comparisons" / "base--vs--better" / "comparison.json").read_text())
        assert {r["setting"] for r in doc["rows"]} == {"kind=even", "kind=odd", "all"}

        res = cli(["leaderboard", f"s3://{bucket}/suites/nothing-here", "--no-tracking"])
        assert res.exit_code != 0 and "no such folder" in res.output
