"""`llmrec submit` ships no secret: credentials inside a URL of the config (an engine's or judge's base_url, the
tracking URI) are refused, never printed by --dry-run nor staged; --address credentials are not echoed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmrec.cluster.jobs import build_job
from llmrec.errors import ConfigError
from tests.pipelines.conftest import config

SECRET = "pw-must-never-leave-the-submitter"
runner = CliRunner()


def _cli():
    from llmrec.cli import _mount_extra_verbs, app

    _mount_extra_verbs()
    return app


def _openai(tmp_path: Path, base_url: str) -> Path:
    return config(tmp_path, engine={"type": "openai", "model": "m", "base_url": base_url})


def _staged_text(stage: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted(stage.rglob("*")) if f.is_file())


@pytest.mark.parametrize("url", [f"https://user:{SECRET}@api.example/v1", f"https://api.example/v1?api_key={SECRET}",
                                 f"https://api.example/v1?x=1&token={SECRET}"])
def test_inline_credentials_in_an_engine_url_are_refused(tmp_path, url):
    stage = tmp_path / "stage"
    with pytest.raises(ConfigError) as e:
        build_job(_openai(tmp_path, url), stage, code="installed")
    assert "engine.base_url" in str(e.value) and "api_key_env" in str(e.value)
    assert SECRET not in str(e.value)
    assert not stage.exists() or SECRET.encode() not in _staged_text(stage)  # nothing staged


def test_judge_and_tracking_urls_are_checked_too(tmp_path):
    judge = "judge=" + json.dumps({"type": "openai", "model": "j", "base_url": f"http://u:{SECRET}@j/v1"})
    with pytest.raises(ConfigError, match="judge.base_url") as e:
        build_job(config(tmp_path), tmp_path / "s1", [judge], code="installed")
    assert SECRET not in str(e.value)
    with pytest.raises(ConfigError, match="tracking.uri") as e:
        build_job(config(tmp_path), tmp_path / "s2", [f"tracking.uri=http://mlflow:5000/?token={SECRET}"],
                  code="installed")
    assert SECRET not in str(e.value)


def test_dry_run_prints_no_credentials(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    res = runner.invoke(_cli(), ["submit", str(_openai(tmp_path, f"https://u:{SECRET}@api.example/v1")), "--dry-run",
                                 "--code", "installed"])
    assert res.exit_code == 2 and SECRET not in res.output
    assert "credentials inside a URL are not submitted" in " ".join(res.output.split())
    # the same secret given through --set is not echoed either
    res = runner.invoke(_cli(), ["submit", str(config(tmp_path)), "--dry-run", "--code", "installed",
                                 "--set", f"engine.base_url=https://u:{SECRET}@api.example/v1"])
    assert res.exit_code == 2 and SECRET not in res.output


def test_staged_package_and_job_spec_hold_no_secret(tmp_path, monkeypatch):
    """What ships (the staged working_dir, the llmrec package built from this checkout, the job spec) is grepped for
    the API key the submitter has in its environment: it is named (api_key_env), never sent."""
    monkeypatch.setenv("LLMREC_TEST_API_KEY", SECRET)
    cfg = config(tmp_path, engine={"type": "openai", "model": "m", "base_url": "https://api.example/v1",
                                   "api_key_env": "LLMREC_TEST_API_KEY"})
    stage = tmp_path / "stage"
    spec = build_job(cfg, stage, code="ship")
    assert (stage / "code" / "llmrec" / "cli.py").is_file()  # the package is really staged
    assert SECRET.encode() not in _staged_text(stage)
    assert SECRET not in json.dumps(spec.submit_kwargs())
    assert "--require-env LLMREC_TEST_API_KEY" in spec.entrypoint


def test_address_credentials_are_not_echoed(tmp_path):
    with socket.socket() as s:  # a port nothing listens on: the Jobs client fails to connect
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(_cli(), ["jobs", "list", "--address", f"http://admin:{SECRET}@127.0.0.1:{port}"])
    assert res.exit_code == 2, res.output
    assert SECRET not in res.output and "cannot reach the Ray Jobs API at http://REDACTED@127.0.0.1" in res.output
