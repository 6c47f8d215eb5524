"""Storage locations that cannot be used fail in one line naming the location, never in a filesystem library's
traceback (``pyarrow.fs.ArrowInvalid`` does not exist: it was an AttributeError) and never by hanging: an S3
endpoint that accepts connections and never answers, or GCS without network, gives up within the timeout."""

from __future__ import annotations

import socket
import time

import pytest

from llmrec import storage
from llmrec.errors import ConfigError, DataError
from tests.fs_limits import run_on_small_fs


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setenv("LLMREC_STORAGE_TIMEOUT_S", "1")


def test_unknown_scheme_is_a_config_error():
    with pytest.raises(ConfigError, match=r"storage location 'foo://x': no filesystem for this scheme"):
        storage.Storage("foo://x")


def test_missing_bucket_names_the_location():
    from tests.runtime.helpers import s3_server

    with s3_server():
        with pytest.raises(storage.StorageError) as e:
            storage.Storage("s3://nobucket/runs").check_writable()
    text = str(e.value)
    assert text.startswith("s3://nobucket/runs: cannot create the folder:") and "\n" not in text
    assert isinstance(e.value, DataError)


def _silent_server():
    """A TCP server on 127.0.0.1 that accepts connections and never answers (an unreachable service)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


@pytest.mark.parametrize("endpoint", ["closed", "silent"])
def test_unreachable_s3_endpoint_fails_in_seconds_in_one_line(monkeypatch, short_timeout, endpoint):
    silent = _silent_server()
    port = silent.getsockname()[1]
    if endpoint == "closed":
        silent.close()  # nothing listens: connection refused
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    t0 = time.perf_counter()
    try:
        with pytest.raises(storage.StorageError) as e:
            storage.Storage("s3://bucket/runs").check_writable()
    finally:
        silent.close()
    took = time.perf_counter() - t0
    assert str(e.value).startswith("s3://bucket/runs: cannot") and "\n" not in str(e.value)
    assert took < 40, took  # pyarrow's defaults took 99 s on the silent endpoint


def test_gcs_without_credentials_or_network_does_not_hang(monkeypatch, short_timeout):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:1")  # no metadata server to ask for credentials either
    t0 = time.perf_counter()
    with pytest.raises(storage.StorageError) as e:
        storage.Storage("gs://llmrec-no-such-bucket/runs").check_writable()
    assert str(e.value).startswith("gs://llmrec-no-such-bucket/runs: cannot") and "\n" not in str(e.value)
    assert time.perf_counter() - t0 < 60


def test_a_file_where_a_folder_should_be(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(storage.StorageError, match=f"{tmp_path / 'f'}: cannot create the folder: .*not a folder"):
        storage.Storage(tmp_path / "f").mkdir()
    with pytest.raises(storage.StorageError, match="cannot create the folder"):
        storage.Storage(tmp_path / "f" / "below").write_text("a.txt", "x")


def test_a_full_disk_is_one_line_naming_the_file_and_leaves_no_partial_file(tmp_path):
    mount = tmp_path / "mnt"
    code = ("from llmrec import storage\n"
            "try:\n"
            f"    storage.Storage({str(mount)!r}).write_bytes('big.bin', b'x' * 2_000_000)\n"
            "except storage.StorageError as e:\n"
            "    print('ERR', e)\n"
            "import os\n"
            f"print('LEFT', sorted(os.listdir({str(mount)!r})))\n")
    res = run_on_small_fs(mount, code, size_kb=256)
    assert res.returncode == 0, res.stderr
    assert f"ERR {mount}/big.bin: cannot write: no space left on the device" in res.stdout, res.stdout
    assert "LEFT []" in res.stdout  # the temporary file of the failed write is removed


def test_a_read_only_folder_is_one_line(tmp_path):
    mount = tmp_path / "mnt"
    code = ("from llmrec import storage\n"
            "try:\n"
            f"    storage.Storage({str(mount)!r}).check_writable()\n"
            "except storage.StorageError as e:\n"
            "    print('ERR', e)\n")
    res = run_on_small_fs(mount, code, read_only=True)
    assert f"ERR {mount}/" in res.stdout and "read-only file system" in res.stdout, res.stdout + res.stderr
