"""The request cache's file failing (a full disk: sqlite's `database or disk is full` / `disk I/O error`, a
folder that cannot hold it) is one line naming the file, also when raised in the cache actor, never a traceback."""

from __future__ import annotations

import pytest

from llmrec.serving.cache_service import CacheError, RequestCacheService
from tests.fs_limits import run_on_small_fs


def test_full_disk_under_the_cache_is_one_line_naming_the_file(tmp_path):
    mount = tmp_path / "mnt"
    code = ("from llmrec.serving.cache_service import RequestCacheService, CacheError\n"
            "from llmrec.types import Result\n"
            f"svc = RequestCacheService({str(mount / 'c.sqlite')!r})\n"
            "big = Result(text='x' * 50_000).model_dump_json()\n"
            "try:\n"
            "    for i in range(200):\n"
            "        svc.put_many({f'k{i}-{j}': big for j in range(10)})\n"
            "except CacheError as e:\n"
            "    print('ERR', e)\n")
    res = run_on_small_fs(mount, code, size_kb=1024)
    assert res.returncode == 0, res.stderr[-3000:]
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("ERR ")), "")
    assert line.startswith(f"ERR request cache {mount / 'c.sqlite'}: cannot write:"), res.stdout + res.stderr
    assert "full" in line or "disk I/O error" in line


def test_a_cache_path_that_cannot_be_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(CacheError, match=f"request cache {tmp_path / 'f' / 'c.sqlite'}: cannot open it"):
        RequestCacheService(str(tmp_path / "f" / "c.sqlite"))


def test_the_cache_actor_failing_reaches_the_driver_as_the_same_line(tmp_path, local_ray):
    from llmrec.serving.cache_service import start_cache_service

    (tmp_path / "f").write_text("x")
    with pytest.raises(CacheError) as e:
        start_cache_service(str(tmp_path / "f" / "c.sqlite"), "llmrec-cache-test-bad")
    assert str(e.value).startswith(f"request cache {tmp_path / 'f' / 'c.sqlite'}: cannot open it")
    assert "Traceback" not in str(e.value)
