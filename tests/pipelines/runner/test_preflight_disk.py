"""The output folder's disk, checked before the first sample and named when it fails: full (ENOSPC), read-only
(EROFS) or short of free space. The machine's errors are simulated by making the write's fsync fail (as a full
disk fails it), so these run in the fast tier without mounting a small file system."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest

from llmrec import storage
from tests.pipelines.runner.test_preflight import no_work_done, run, toy_config


def _failing_fsync(code: int):
    def fsync(fd):
        raise OSError(code, errno.errorcode[code])
    return fsync


def test_a_full_disk_is_one_line_naming_the_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(storage.os, "fsync", _failing_fsync(errno.ENOSPC))
    with pytest.raises(storage.StorageError) as e:
        storage.Storage(tmp_path).write_bytes("metrics.json", b"{}")
    assert str(e.value) == (f"{tmp_path}/metrics.json: cannot write: no space left on the device; free some and "
                            "re-run (finished samples are kept)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code, said", [(errno.ENOSPC, "no space left on the device"),
                                        (errno.EROFS, "read-only file system"),
                                        (errno.EDQUOT, "disk quota exceeded")])
def test_an_output_dir_that_cannot_be_written_fails_before_the_work(tmp_path, monkeypatch, code, said):
    path = toy_config(tmp_path, tracking={"enabled": False})
    monkeypatch.setattr(storage.os, "fsync", _failing_fsync(code))
    res, text, _ = run(path)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert f"error: output.dir {tmp_path / 'runs'}/.llmrec-probe-" in text and said in text, text
    assert no_work_done(tmp_path)


def test_too_little_free_space_fails_before_the_work(tmp_path, monkeypatch):
    path = toy_config(tmp_path, tracking={"enabled": False})
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 * 2**30, 10 * 2**30 - 2**20, 2**20))
    res, text, _ = run(path)
    assert res.exit_code == 2, res.output
    assert f"output.dir {tmp_path / 'runs'}: only 1.0 MB free on its disk, less than the 100 MB" in text, text
    assert "LLMREC_MIN_FREE_MB" in text and no_work_done(tmp_path)
    monkeypatch.setenv("LLMREC_MIN_FREE_MB", "0.5")  # said how to accept less, and it is accepted
    from llmrec.pipelines.runner.preflight import check_output

    check_output(str(tmp_path / "runs"))
