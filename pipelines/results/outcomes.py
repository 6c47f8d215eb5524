"""One run's per-unit outcomes, as the verbs that read results (leaderboard, compare, judges) need them.

Rows come from :class:`llmrec.pipelines.results.stored.StoredRun` (the result store's shards or the samples file).
Outcomes are the benchmark's ``paired_outcomes`` (sample,
setting, cluster, metric, value, statistic); the benchmark's data is loaded only when they need it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from llmrec.errors import DataError, LlmrecError
from llmrec.pipelines import capabilities as caps

log = logging.getLogger(__name__)

OUTCOME_COLUMNS = ["sample_id", "setting", "cluster", "metric", "value", "statistic"]


def unit_outcomes(bench, bench_cfg, rows: list[dict], data_dir: str | Path | None, cache: dict,
                  quiet: bool = False) -> pd.DataFrame:
    """``bench.paired_outcomes`` of ``rows`` as a frame (``OUTCOME_COLUMNS``). The benchmark's assets are loaded
    (once per benchmark config and data folder, kept in ``cache``) only when the outcomes fail without them.
    ``quiet``: a benchmark that cannot give outcomes here gives none (the leaderboard then counts samples);
    otherwise that is a ``DataError``."""
    import json

    from llmrec.pipelines.common.datasets import resolve_data_dir

    def outcomes(assets):
        return pd.DataFrame([asdict(o) for o in caps.paired_outcomes(bench, bench_cfg, rows, assets)],
                            columns=OUTCOME_COLUMNS)

    try:
        return outcomes(None)
    except Exception:  # noqa: BLE001 - some benchmarks need their data for outcomes; tried with it below
        pass
    key = (bench.name, json.dumps(bench_cfg.model_dump(mode="json"), sort_keys=True), str(data_dir))
    if key not in cache:
        try:
            root = resolve_data_dir(Path(data_dir) if data_dir is not None else None, caps.data(bench))
            cache[key] = caps.assets(bench, bench_cfg, root)
        except LlmrecError:  # no data here
            cache[key] = None
    try:
        return outcomes(cache[key])
    except Exception as e:  # noqa: BLE001 - reported in one line (or, quiet, as no outcomes)
        if quiet:
            log.debug("%s: no per-unit outcomes (%s: %s)", bench.name, type(e).__name__, e)
            return pd.DataFrame(columns=OUTCOME_COLUMNS)
        raise DataError(f"per-sample outcomes: {type(e).__name__}: {e} (the benchmark's data: --data-dir)") from e


def run_outcomes(run, data_dir: str | Path | None, cache: dict, rows: list[dict] | None = None,
                 quiet: bool = False) -> pd.DataFrame:
    """A stored run's per-unit outcomes (:func:`unit_outcomes` of its rows, or of ``rows``, a subset), its data folder
    the run's own unless ``data_dir`` is given; a failure is a ``DataError`` naming the run."""
    try:
        return unit_outcomes(run.bench, run.run_config.benchmark, run.rows if rows is None else rows,
                             data_dir or run.run_config.data.dir, cache, quiet)
    except DataError as e:
        raise DataError(f"{run.path}: {e}") from e
