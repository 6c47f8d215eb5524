"""One MLflow run for a read verb's result (``llmrec compare``, ``llmrec judges``): the shape they share.

A reader logs into the experiment of the run it read last (its ``tracking.experiment``, else its benchmark's name),
in the reader's own store (``--tracking-uri``, else the environment's or the default; never the store a run's config
names: ``tracking.reader_section``). The run gets its name, params, tags, metrics and the verb's files as artifacts,
and is finished at once. (``llmrec leaderboard`` keeps one record per set of sources, updated in place: its own.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from llmrec import tracking
from llmrec.pipelines.results.stored import StoredRun


def log_reading(run: StoredRun, name: str, params: dict, tags: dict, metrics: dict, files: Iterable[Path],
                enabled: bool | None = None, uri: str | None = None) -> str | None:
    """Log one finished MLflow run for what a verb read; its id, or None where tracking is off (``enabled``: the
    verb's ``--tracking/--no-tracking``, default the run's ``tracking.enabled``)."""
    tr = tracking.reader_section(run.run_config.tracking, uri)
    if not (tr.enabled if enabled is None else enabled):
        return None
    exp_id = tracking.setup(tr.uri, tr.experiment or run.installed_bench().name, tr.artifact_root)
    client = tracking.client(tr.uri)
    run_id = tracking.start_run(client, exp_id, name[:240], params, tags)
    tracking.log_metrics(client, run_id, metrics)
    for f in files:
        client.log_artifact(run_id, str(f))
    client.set_terminated(run_id, "FINISHED")
    return run_id
