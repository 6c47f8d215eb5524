"""`llmrec data fetch`: pinned files over HTTP with checksums, tested against a local server."""

from __future__ import annotations

import hashlib
import http.server
import threading
from functools import partial
from pathlib import Path

import pytest

from llmrec.errors import DataError
from llmrec.pipelines.protocol import DataFile, DataManifest
from llmrec.pipelines.common.datasets import fetch, resolve_data_dir


@pytest.fixture()
def server(tmp_path):
    root = tmp_path / "www"
    (root / "benchmark_dataset").mkdir(parents=True)
    (root / "benchmark_dataset/a.json").write_text('[{"x": 1}]')
    (root / "benchmark_dataset/b.json").write_text("[]")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def manifest(root: Path, url: str, tamper: bool = False) -> DataManifest:
    files = []
    for name in ("a.json", "b.json"):
        digest = hashlib.sha256((root / "benchmark_dataset" / name).read_bytes()).hexdigest()
        if tamper and name == "b.json":
            digest = "0" * 64
        files.append(DataFile(f"bench/benchmark_dataset/{name}", f"{url}/benchmark_dataset/{name}", digest))
    return DataManifest("bench", url, tuple(files), probe="bench/benchmark_dataset/a.json")


def test_fetch_verifies_and_is_found(server, tmp_path, monkeypatch):
    root, url = server
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMREC_DATA_DIR", raising=False)
    m = manifest(root, "https://example.invalid/pinned")
    with pytest.raises(DataError, match="LLMREC_DATA_DIR"):
        resolve_data_dir(None, m)
    dest = fetch(m, base_url=url)  # mirror URL replaces the pinned prefix
    assert (dest / "bench/benchmark_dataset/a.json").read_text() == '[{"x": 1}]'
    assert resolve_data_dir(None, m) == tmp_path / "cache" / "data"
    # explicit dir and $LLMREC_DATA_DIR come first
    other = tmp_path / "other"
    (other / "bench/benchmark_dataset").mkdir(parents=True)
    (other / "bench/benchmark_dataset/a.json").write_text("[]")
    monkeypatch.setenv("LLMREC_DATA_DIR", str(other))
    assert resolve_data_dir(None, m) == other
    assert resolve_data_dir(tmp_path / "cache" / "data", m) == tmp_path / "cache" / "data"


def test_checksum_mismatch_and_no_network(server, tmp_path):
    root, url = server
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch(manifest(root, url, tamper=True), tmp_path / "d")
    assert not (tmp_path / "d/bench/benchmark_dataset/b.json").exists()
    with pytest.raises(DataError, match="LLMREC_DATA_DIR"):
        fetch(manifest(root, "http://127.0.0.1:9"), tmp_path / "e", timeout_s=2)


def test_prefeval_manifest_matches_shared_copy():
    from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
    from llmrec.pipelines.common.datasets import sha256_file
    from tests.conftest import require_data

    root = require_data("prefeval").parent
    files = BENCHMARK.data.files
    assert len(files) == 85 and all(f.url.startswith("https://raw.githubusercontent.com/amazon-science/PrefEval/50795054")
                                    for f in files)
    for f in files[:5]:
        assert sha256_file(root / f.path) == f.sha256
