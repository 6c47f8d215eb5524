"""Issue 22: credentials in URLs (user info, secret-looking query parameters) are recorded nowhere:
not in resolved.yaml, MLflow params and tags, the result store, samples.parquet or failure texts.
The config the engine connects with keeps them."""

from __future__ import annotations

import socket

import pandas as pd
import pytest
import yaml

from llmrec import tracking
from llmrec.config import dump_yaml
from llmrec.pipelines.common.store import ResultStore
from llmrec.pipelines.runner.run_config import RunConfig
from llmrec.types import Result
from tests.pipelines.toy.benchmark import NAME

SECRETS = ("s3cret", "TOPSECRET", "SIGVALUE", "alice")


@pytest.mark.parametrize("url, expected", [
    ("http://alice:s3cret@host:8000/v1", "http://REDACTED@host:8000/v1"),
    ("https://alice@host/v1", "https://REDACTED@host/v1"),
    ("https://h/v1?token=TOPSECRET&api-version=2024", "https://h/v1?token=REDACTED&api-version=2024"),
    ("https://acct.blob/c?sv=2022&sig=SIGVALUE&se=x", "https://acct.blob/c?sv=2022&sig=REDACTED&se=x"),
    ("https://b.s3/k?X-Amz-Signature=SIGVALUE&X-Amz-Date=1", "https://b.s3/k?X-Amz-Signature=REDACTED&X-Amz-Date=1"),
    ("https://h/cb#access_token=TOPSECRET", "https://h/cb#access_token=REDACTED"),
    ("http://h/v1?api_key=TOPSECRET", "http://h/v1?api_key=REDACTED"),
    ("http://127.0.0.1:8000/v1?max_tokens=5", "http://127.0.0.1:8000/v1?max_tokens=5"),  # not a secret: unchanged
    ("s3://bucket/runs", "s3://bucket/runs"),
])
def test_redact_url(url, expected):
    from llmrec.redact import redact_url

    assert redact_url(url) == expected


def test_urls_inside_text_and_failure_results_are_redacted():
    from llmrec.redact import redact_text

    text = "POST http://alice:s3cret@10.0.0.1:8000/v1/chat/completions: ConnectError: refused"
    assert redact_text(text) == "POST http://REDACTED@10.0.0.1:8000/v1/chat/completions: ConnectError: refused"
    assert "s3cret" not in Result(finish_reason="error", error=text).error


def openai_config(tmp_path, port: int) -> RunConfig:
    return RunConfig.model_validate({
        "benchmark": {"name": NAME, "n": 2, "rounds": 0},
        "engine": {"type": "openai", "model": "m",
                   "base_url": f"http://alice:s3cret@127.0.0.1:{port}/v1?api_key=TOPSECRET"},
        "execution": {"retries": 0, "backoff_s": 0.0},
        "output": {"dir": str(tmp_path / "runs"), "run_name": "r", "cache": False},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art"),
                     "experiment": "redaction"},
    })


def test_recorded_configs_params_and_tags_carry_no_credentials(tmp_path):
    cfg = openai_config(tmp_path, 9)
    assert "s3cret" in cfg.engine.base_url  # what the engine connects with is untouched
    text = dump_yaml(cfg)
    assert "http://REDACTED@127.0.0.1:9/v1?api_key=REDACTED" in text and not any(s in text for s in SECRETS)
    params = tracking.safe_params(cfg.model_dump(mode="json"))
    assert params["engine.base_url"] == "http://REDACTED@127.0.0.1:9/v1?api_key=REDACTED"
    tags = tracking.run_tags("run", {"judge_url": cfg.engine.base_url}, None, model=cfg.engine.base_url)
    assert not any(s in v for v in tags.values() for s in SECRETS)


def test_the_result_store_keeps_no_credentials(tmp_path):
    store = ResultStore(tmp_path / "results")
    store.write([{"sample_id": "a", "status": "failed", "error": "http://alice:s3cret@h/v1: refused",
                  "outputs": {"ask": {"error": "http://h/v1?token=TOPSECRET: HTTP 401"}}}])
    rec = store.load()["a"]
    assert rec["error"] == "http://REDACTED@h/v1: refused"
    assert rec["outputs"]["ask"]["error"] == "http://h/v1?token=REDACTED: HTTP 401"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_run_against_a_url_with_credentials_records_none_of_them(tmp_path, local_ray):
    """End to end: an openai engine whose URL carries a password and a key fails every request
    (nothing listens); the run's files, result store, samples.parquet and MLflow hold no secret."""
    import mlflow

    from llmrec.pipelines.runner.api import run_evaluation

    out = run_evaluation(openai_config(tmp_path, free_port()))
    assert out.metrics["failed"] == 2  # both samples
    run_dir = tmp_path / "runs" / "r"
    samples = pd.read_parquet(run_dir / "samples.parquet")
    assert samples["error"].str.contains("http://REDACTED@127.0.0.1").all()
    recorded = [samples.to_json(), *(str(r) for r in ResultStore(run_dir / "results").load().values())]
    recorded += [f.read_text(errors="replace") for f in run_dir.rglob("*") if f.suffix in (".yaml", ".json", ".jsonl")]
    recorded.append((tmp_path / "mlruns.db").read_bytes().decode("latin-1"))
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    run = client.get_run(out.mlflow_run_id)
    recorded += [str(run.data.params), str(run.data.tags)]
    assert run.data.params["engine.base_url"].startswith("http://REDACTED@127.0.0.1:")
    leaks = [s for s in SECRETS for text in recorded if s in text]
    assert not leaks
