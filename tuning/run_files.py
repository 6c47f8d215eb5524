"""Where the files of a `llmrec train` run or a `llmrec tune` sweep go: a local folder or a
storage URI (``output.dir: s3://bucket/baselines``), through ``llmrec.storage``.

Files are made in a local working folder, then published to the run's location:

* a local ``output.dir`` (relative: to the driver's working directory) is its own working
  folder, so nothing is copied; text files are still written atomically (temporary + rename);
* a URI works in a temporary folder: checkpoints are published after every validation (a
  driver that dies mid-training loses at most one validation interval), the other files when
  the run ends, the metrics (``RunDir.METRICS``) last (a run directory with its metrics is complete);
  every object is published whole. ``--resume`` first fetches ``checkpoint/`` from the URI.

Reports (the metrics file, MLflow tags) name files by their location (``s3://…/best.pt``). The writing is
``llmrec.rundir.RunWriter``'s (as for ``llmrec run``); this adds the checkpoint's fetch and publish order.
"""

from __future__ import annotations

from pathlib import Path

from llmrec import storage
from llmrec.models.trainer import CHECKPOINT, LAST
from llmrec.rundir import RunWriter


class RunFiles(RunWriter):
    """One training run (or sweep) directory ``parent/name``: ``work`` is the local folder files are made in."""

    def __init__(self, parent: str | Path, name: str):
        super().__init__(storage.Storage(parent) / name)

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
