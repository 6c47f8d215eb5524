"""Pinned baselines: a name for a finished run or suite that ``llmrec gate`` tests candidates against.

A pin lives in the MLflow tracking store, so every machine that logs to the same store (a laptop, a CI job) sees the
same pins: it is a run without metrics in the experiment ``llmrec-pins``, named after the pin, whose tags record
where the pinned results are (``llmrec.pin.location``: a run or suite directory, local or ``s3://…``) and, per
benchmark entry, the run's location, its config hash (the settings that determine results, as ``llmrec run`` logs
it) and its protocol record's hash. Pinning a name again moves it (the newest pin of a name is the one used; older
ones stay in the experiment as history). At gate time the pinned runs are re-opened and their config hashes
checked against the pin, so results that changed under a pin's location are refused rather than silently used.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

from llmrec import pin_store, storage, tracking
from llmrec.config import fingerprint
from llmrec.errors import ConfigError
from llmrec.pipelines.results.stored import StoredRun, open_runs
from llmrec.pin_store import EXPERIMENT, TAG_ENTRY, TAG_HASH, TAG_LOCATION, TAG_NAME, TAG_PROTOCOL
from llmrec.rundir import RunDir

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class PinnedEntry:
    group: str  # the benchmark entry the gate pairs candidates with (a suite's entry, else the benchmark)
    name: str
    location: str
    config_hash: str
    protocol_hash: str


@dataclass(frozen=True)
class Pin:
    name: str
    location: str
    config_hash: str
    protocol: str
    entries: tuple[PinnedEntry, ...]
    pinned_at: str
    mlflow_run_id: str


def config_hash(run: StoredRun) -> str:
    """The hash ``llmrec run`` logs as ``llmrec.config_hash``: of the settings that determine results."""
    return fingerprint(run.run_config.semantic())


def protocol_hash(run: StoredRun) -> str:
    return fingerprint(run.protocol)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(f"pin name {name!r}: use letters, digits, '.', '_' and '-' (up to 100), starting with a "
                          "letter or digit")
    return name


def gated_runs(location: str) -> list[StoredRun]:
    """The LLM runs of a run or suite directory (local or a storage URI), each checked readable for a gate."""
    runs = [r for r in open_runs([location], needs=(RunDir.CONFIG,)) if r.kind == "llm"]
    if not runs:
        raise ConfigError(f"{location}: no LLM run in it to pin or gate")
    for r in runs:
        r.run_config  # noqa: B018 - a config that does not validate is named before any work
        r.installed_bench()
    groups = [r.group for r in runs]
    twice = sorted({g for g in groups if groups.count(g) > 1})
    if twice:
        raise ConfigError(f"{location}: several runs of one benchmark entry ({', '.join(twice)}); pin or gate one "
                          "run per entry (a suite of one subject, or a run directory)")
    return runs


def _absolute(location: str) -> str:
    return location if storage.is_uri(location) else str(Path(location).resolve())


def describe(location: str, name: str) -> Pin:
    """The pin ``name`` of ``location`` (a run or suite directory) as it would be recorded, not yet stored."""
    check_name(name)
    location = _absolute(location)
    runs = gated_runs(location)
    entries = tuple(PinnedEntry(r.group, r.name, _absolute(str(r.dir.uri)), config_hash(r), protocol_hash(r))
                    for r in runs)
    whole = entries[0].config_hash if len(entries) == 1 else fingerprint([e.config_hash for e in entries])
    protocol = json.dumps(runs[0].protocol, sort_keys=True) if len(runs) == 1 else \
        fingerprint([e.protocol_hash for e in entries])
    return Pin(name, location, whole, protocol, entries, "", "")


def pin(location: str, name: str, uri: str | None = None) -> Pin:
    """Record ``location`` (a run or suite directory) as the baseline ``name`` in the tracking store at ``uri``."""
    p = describe(location, name)
    tags = {TAG_NAME: p.name, TAG_LOCATION: p.location, TAG_HASH: p.config_hash,
            TAG_PROTOCOL: p.protocol[:tracking.MAX_PARAM_LEN],
            **{f"{TAG_ENTRY}{i:04d}": json.dumps(e.__dict__) for i, e in enumerate(p.entries)}}
    client = tracking.client(uri)
    exp_id = tracking.ensure_experiment(client, EXPERIMENT)
    run = client.create_run(exp_id, tags=tags, run_name=p.name)
    client.set_terminated(run.info.run_id)
    return _pin_of(client.get_run(run.info.run_id))


def _pin_of(run) -> Pin:
    tags = run.data.tags
    entries = tuple(PinnedEntry(**e) for e in pin_store.entries(run))
    when = dt.datetime.fromtimestamp(run.info.start_time / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Pin(tags[TAG_NAME], tags[TAG_LOCATION], tags.get(TAG_HASH, ""), tags.get(TAG_PROTOCOL, ""), entries,
               when, run.info.run_id)


def pins(uri: str | None = None) -> list[Pin]:
    """The newest pin of each name, by name. Reading never creates a store."""
    found = pin_store.newest_pin_runs(uri)
    return [_pin_of(found[k]) for k in sorted(found)]


def pinned(name: str, uri: str | None = None) -> Pin:
    """The pin ``name``; a ``ConfigError`` listing the pins there are when there is none of that name."""
    return _pin_of(pin_store.pinned_run(name, uri))
