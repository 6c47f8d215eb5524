"""Where pinned baselines are kept: tag-only runs of the MLflow experiment ``llmrec-pins`` (``llmrec baseline pin``
writes them, ``llmrec gate`` and a run's ``execution.stop_when`` read them). Only the tags and their lookup live here,
below every layer; what a pin records is decided by ``pipelines/results/pins.py``."""

from __future__ import annotations

import json

from llmrec import tracking
from llmrec.errors import ConfigError

EXPERIMENT = "llmrec-pins"
TAG_NAME = "llmrec.pin.name"
TAG_LOCATION = "llmrec.pin.location"
TAG_HASH = "llmrec.pin.config_hash"  # of the run, or of a suite's entries' hashes
TAG_PROTOCOL = "llmrec.pin.protocol"  # the protocol record (one run) or a hash of its entries' (a suite)
TAG_ENTRY = "llmrec.pin.entry."  # + index: one entry's JSON record


def newest_pin_runs(uri: str | None = None) -> dict[str, object]:
    """The newest MLflow run of each pin name (name → run). Reading never creates a store."""
    client = tracking.client(tracking.existing_store(uri))
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return {}
    newest: dict[str, object] = {}
    for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=5000):
        name = run.data.tags.get(TAG_NAME)
        if name and name not in newest:
            newest[name] = run
    return newest


def pinned_run(name: str, uri: str | None = None):
    """The newest MLflow run of the pin ``name``; a ``ConfigError`` listing the pins there are when none."""
    found = newest_pin_runs(uri)
    if name not in found:
        raise ConfigError(f"no baseline pinned as {name!r} in the tracking store {tracking.tracking_uri(uri)} "
                          f"(pinned: {', '.join(sorted(found)) or 'none'}); pin one with `llmrec baseline pin "
                          f"RUN_OR_SUITE --name {name}`")
    return found[name]


def entries(run) -> list[dict]:
    """A pin run's per-entry records (group, name, location, config_hash, protocol_hash), in pinned order."""
    tags = run.data.tags
    return [json.loads(tags[k]) for k in sorted(tags) if k.startswith(TAG_ENTRY)]
