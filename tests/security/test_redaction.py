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
    ("https://acct.blob/c?sv=2022&sig=SIGVALUE&se=x", "https://acct.blob/c?sv=REDACTED&sig=REDACTED&se=REDACTED"),
    ("https://b.s3/k?X-Amz-Signature=SIGVALUE&X-Amz-Date=1",
     "https://b.s3/k?X-Amz-Signature=REDACTED&X-Amz-Date=REDACTED"),
    # every query value is a secret unless known harmless: a gateway may take its credential under any name
    ("https://gw/v1?auth=TOPSECRET&apitoken=TOPSECRET", "https://gw/v1?auth=REDACTED&apitoken=REDACTED"),
    ("https://acct.blob/c?sas=SIGVALUE&api-version=2024-02", "https://acct.blob/c?sas=REDACTED&api-version=2024-02"),
    ("s3://b/runs?region=eu-west-1&secret_key=TOPSECRET&session_token=TOPSECRET",
     "s3://b/runs?region=eu-west-1&secret_key=REDACTED&session_token=REDACTED"),
    ("https://h/cb#access_token=TOPSECRET", "https://h/cb#access_token=REDACTED"),
    ("http://h/v1?api_key=TOPSECRET", "http://h/v1?api_key=REDACTED"),
    ("http://127.0.0.1:8000/v1?api-version=5", "http://127.0.0.1:8000/v1?api-version=5"),  # harmless: unchanged
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
                   "base_url": f"http://alice:s3cret@127.0.0.1:{port}/v1?api_key=TOPSECRET&auth=TOPSECRET"},
        "execution": {"retries": 0, "backoff_s": 0.0},
        "output": {"dir": str(tmp_path / "runs"), "run_name": "r", "cache": False},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlruns.db", "artifact_root": str(tmp_path / "art"),
                     "experiment": "redaction"},
    })


def test_recorded_configs_params_and_tags_carry_no_credentials(tmp_path):
    cfg = openai_config(tmp_path, 9)
    assert "s3cret" in cfg.engine.base_url  # what the engine connects with is untouched
    text = dump_yaml(cfg)
    assert "http://REDACTED@127.0.0.1:9/v1?api_key=REDACTED&auth=REDACTED" in text and not any(s in text for s in SECRETS)
    params = tracking.safe_params(cfg.model_dump(mode="json"))
    assert params["engine.base_url"] == "http://REDACTED@127.0.0.1:9/v1?api_key=REDACTED&auth=REDACTED"
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
    recorded += [f.read_bytes().decode("latin-1") for f in (tmp_path / "art").rglob("*") if f.is_file()]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlruns.db")
    run = client.get_run(out.mlflow_run_id)
    recorded += [str(run.data.params), str(run.data.tags)]
    assert run.data.params["engine.base_url"].startswith("http://REDACTED@127.0.0.1:")
    leaks = [s for s in SECRETS for text in recorded if s in text]
    assert not leaks


def test_stored_model_answers_are_never_rewritten(tmp_path):
    """What a model said is stored as it said it, URLs with user info and query values included; only an error
    text (which may quote the configured URL a call failed on) is redacted."""
    said = "Buy it at https://bob@shop.example.com/p?key=K123 today."
    store = ResultStore(tmp_path / "results")
    store.write([{"sample_id": "a", "status": "ok", "answer": said,
                  "outputs": {"ask": {"text": said, "calls": [{"output": said}]}}},
                 {"sample_id": "b", "status": "failed", "error": "http://h/v1?auth=TOPSECRET: HTTP 401",
                  "outputs": {"ask": {"text": said, "error": "http://h/v1?apitoken=TOPSECRET: HTTP 401"}}}])
    got = store.load()
    assert got["a"]["answer"] == said and got["a"]["outputs"]["ask"] == {"text": said, "calls": [{"output": said}]}
    assert got["b"]["outputs"]["ask"]["text"] == said
    assert got["b"]["error"] == "http://h/v1?auth=REDACTED: HTTP 401"
    assert got["b"]["outputs"]["ask"]["error"] == "http://h/v1?apitoken=REDACTED: HTTP 401"


def test_query_string_credentials_of_a_configured_url_are_recorded_nowhere(tmp_path):
    """``base_url: …/v1?auth=…&apitoken=…`` (and ``sas=``): resolved.yaml, MLflow params and tags carry none of
    the values; the engine connects with them."""
    cfg = openai_config(tmp_path, 9).model_copy()
    url = "http://127.0.0.1:9/v1?auth=TOPSECRET&apitoken=TOPSECRET&sas=SIGVALUE&api-version=2024"
    cfg.engine.base_url = url
    assert cfg.engine.base_url == url
    text = dump_yaml(cfg)
    assert "v1?auth=REDACTED&apitoken=REDACTED&sas=REDACTED&api-version=2024" in text
    assert not any(s in text for s in SECRETS)
    params = tracking.safe_params(cfg.model_dump(mode="json"))
    assert not any(s in v for v in params.values() for s in SECRETS)
    tags = tracking.run_tags("run", {"judge_url": url}, None, model=url)
    assert not any(s in v for v in tags.values() for s in SECRETS)


def test_a_storage_uri_with_credentials_is_not_quoted_in_its_error():
    """An S3 URI whose query carries ``secret_key`` / ``session_token``: a storage error names it redacted."""
    from llmrec.errors import LlmrecError
    from llmrec.storage import Storage

    for uri in ("s3://bucket/runs?secret_key=TOPSECRET&session_token=TOPSECRET&bogus_option=1",
                "nosuchscheme://bucket/runs?secret_key=TOPSECRET&session_token=TOPSECRET"):
        with pytest.raises(LlmrecError) as e:
            Storage(uri).list()
        assert "TOPSECRET" not in str(e.value) and "secret_key=REDACTED" in str(e.value), str(e.value)
