"""Where the files of a `llmrec train` run or a `llmrec tune` sweep go: a local folder or a
storage URI (``output.dir: s3://bucket/baselines``), through ``llmrec.storage``.

Files are made in a local working folder, then published to the run's location:

* a local ``output.dir`` (relative: to the driver's working directory) is its own working
  folder, so nothing is copied; text files are still written atomically (temporary + rename);
* a URI works in a temporary folder: checkpoints are published after every validation (a
  driver that dies mid-training loses at most one validation interval), the other files when
  the run ends, the metrics (``RunDir.METRICS``) last (a run directory with its metrics is complete);
  every object is published whole. ``--resume`` first fetches ``checkpoint/`` from the URI.

Reports (the metrics file, MLflow tags) name files by their location (``s3://…/best.pt``). File names are
``llmrec.rundir.RunDir``'s.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from llmrec import storage
from llmrec.models.trainer import CHECKPOINT, LAST
from llmrec.rundir import RunDir


class RunFiles:
    """One run (or sweep) directory: ``work`` is the local folder files are made in."""

    def __init__(self, parent: str | Path, name: str):
        self.store = storage.Storage(parent) / name
        self._tmp = None
        if self.store.local:
            self.work = self.store.local_path
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="llmrec-run-")
            self.work = Path(self._tmp.name)
        self.work.mkdir(parents=True, exist_ok=True)

    @property
    def uri(self) -> str:
        return self.store.uri

    @property
    def run_dir(self) -> RunDir:
        """The run directory as the verbs that read results see it."""
        return RunDir(self.store)

    @property
    def name(self) -> str:
        return self.store.name

    def location(self, rel: str) -> str:
        """Where ``rel`` (``checkpoint/best.pt``) lives: a local path or a URI."""
        return f"{self.uri}/{rel}"

    def exists(self, rel: str) -> bool:
        folder, _, name = rel.rpartition("/")
        return (self.store / folder if folder else self.store).exists(name)

    def write_text(self, rel: str, text: str) -> Path:
        """Write ``rel`` atomically in the working folder and publish it; returns the local file."""
        folder, _, name = rel.rpartition("/")
        storage.Storage(self.work / folder if folder else self.work).write_text(name, text)
        self.publish(rel)
        return self.work / rel

    def read_text(self, rel: str) -> str:
        folder, _, name = rel.rpartition("/")
        return (self.store / folder if folder else self.store).read_text(name)

    def publish(self, *rels: str) -> None:
        """Upload these files of the working folder to a URI run directory (no-op when local)."""
        if self.store.local:
            return
        for rel in rels:
            if (self.work / rel).is_file():
                self.store.put_file(self.work / rel, rel)

    def publish_all(self, last: str | None = None, skip: tuple[str, ...] = ()) -> None:
        """Upload every file of the working folder (but those under ``skip`` folders), ``last`` last."""
        rels = sorted(p.relative_to(self.work).as_posix() for p in self.work.rglob("*") if p.is_file())
        rels = [r for r in rels if r != last and not r.startswith(tuple(f"{s}/" for s in skip))]
        self.publish(*rels, *([last] if last else []))

    def fetch(self, folder: str) -> list[str]:
        """Download ``folder``'s files from a URI run directory into the working folder (no-op when local)."""
        if self.store.local:
            return sorted(p.name for p in (self.work / folder).glob("*") if p.is_file())
        return (self.store / folder).get_files(self.work / folder)

    def fetch_checkpoint(self) -> bool:
        """Fetch ``checkpoint/`` (a URI run directory); True when it holds ``last.pt`` or ``best.pt`` to resume from."""
        return any(n in self.fetch("checkpoint") for n in (LAST, CHECKPOINT))

    def publish_checkpoint(self, new_best: bool) -> None:
        """Publish a validation's checkpoint: a new best first, then the last epoch, so a resumed run
        never finds a ``last.pt`` newer than its ``best.pt``."""
        self.publish(*([f"checkpoint/{CHECKPOINT}"] if new_best else []), f"checkpoint/{LAST}")

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
