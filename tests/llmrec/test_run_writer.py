"""RunWriter: the one way run, suite, train, tune and sft write a run directory (local or at a storage URI)."""

from __future__ import annotations

import uuid

from llmrec.rundir import RunDir, RunWriter
from llmrec.storage import Storage


def test_a_local_run_directory_is_its_own_working_folder(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        assert w.work == tmp_path / "run" and w.work.is_dir()
        w.write_config("a: 1\n")
        w.write_protocol({"split": "loo"})
        w.write_metrics({"acc": 0.5})
    rd = RunDir(tmp_path / "run")
    assert rd.config() == {"a": 1} and rd.metrics() == {"acc": 0.5}
    assert (tmp_path / "run").is_dir()  # closing never removes a local run directory


def test_a_uri_run_directory_gets_every_file_published_and_the_metrics_last(monkeypatch):
    uri = f"memory://llmrec-test-{uuid.uuid4().hex}/run"
    order: list[str] = []
    put = Storage.put_file
    monkeypatch.setattr(Storage, "put_file", lambda self, local, rel: (order.append(rel), put(self, local, rel)))
    w = RunWriter(uri)
    work = w.work
    assert work.is_dir() and not RunDir(uri).has_metrics()
    w.write_metrics({"acc": 1.0}, publish=False)  # made first, published last
    w.write_config("a: 1\n", publish=False)
    (w.file("plots")).mkdir()
    (w.file("plots") / "x.png").write_bytes(b"png")
    w.write_text("checkpoint/best.pt", "weights", publish=False)
    assert order == [] and not RunDir(uri).has_config()  # nothing is published before it is asked for
    w.publish_all(skip=("checkpoint",))
    assert sorted(order[:-1]) == ["plots/x.png", RunDir.CONFIG] and order[-1] == RunDir.METRICS
    rd = RunDir(uri)
    assert rd.metrics() == {"acc": 1.0} and rd.config() == {"a": 1} and rd.plots.list() == ["x.png"]
    assert not (rd.storage / "checkpoint").exists("best.pt")
    w.close()
    assert not work.exists()  # the temporary working folder goes once the files are published
