"""Recommendation scores split by memorization: is a subject better on the items it can recite?

A memorization probe run (a benchmark with ``ProbesMemory``) says, per item of a catalogue, whether the subject
reproduced it. A run of the same subject whose rows are each about one item of that catalogue (``TargetsItems``:
Beyond Utility's held-out target, an LRWorld probe's item) is then split: each per-unit outcome of its headline
metrics (what ``llmrec compare`` pairs) goes to "memorized" or "not memorized" by its item, and the split reports
mean(memorized) − mean(not) with a 95 % CI that resamples whole clusters (users; ``paired.group_difference``).
Units whose item the probe did not ask are counted as unprobed and left out; a side with no unit gives NaN, never a
number that looks sure. This is the per-run form of "accuracy tracks memorization" (Di Palma et al., SIGIR 2025).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.common import paired
from llmrec.pipelines.common.stats import FEW, few_clusters
from llmrec.pipelines.results.outcomes import unit_outcomes
from llmrec.pipelines.results.stored import RunNotReadable, StoredRun

log = logging.getLogger(__name__)

COLUMNS = ("subject", "entry", "catalogue", "setting", "metric", "n_memorized", "n_not_memorized", "n_unprobed",
           "mean_memorized", "mean_not_memorized", "diff", "ci_low", "ci_high", "n_clusters")


def _rows(run: StoredRun) -> list[dict] | None:
    """A run's stored rows; None where it kept none (a run that stored only its metrics has nothing to split)."""
    try:
        return run.rows
    except RunNotReadable as e:
        log.info("memorized vs not: %s left out (%s)", run.name, e)
        return None


def _probed(runs: list[StoredRun]) -> dict[tuple[str, str], dict[tuple[str, str], bool]]:
    """(subject, catalogue) → item → memorized, over every probe run among ``runs``."""
    out: dict[tuple[str, str], dict[tuple[str, str], bool]] = {}
    for run in runs:
        if run.bench is None or not isinstance(run.bench, caps.ProbesMemory):
            continue
        catalogue = caps.probed_catalogue(run.bench, run.run_config.benchmark)
        if catalogue is not None and (rows := _rows(run)) is not None:
            out.setdefault((run.subject, catalogue), {}).update(caps.memorized_items(run.bench, rows))
    return out


def memorization_splits(runs: list[StoredRun], data_dir: Path | None = None, cache: dict | None = None,
                        resamples: int = 2000, seed: int = 0) -> list[dict]:
    """One row per (run, setting, headline metric) of each run about items whose subject has a probe run of that
    catalogue among ``runs`` (``COLUMNS``); [] where there is none."""
    probed = _probed(runs)
    if not probed:
        return []
    cache = {} if cache is None else cache
    out = []
    for run in runs:
        if run.bench is None or not isinstance(run.bench, caps.TargetsItems) or run.kind != "llm":
            continue
        cfg = run.run_config.benchmark
        rows = [r for r in _rows(run) or [] if r.get("status", "ok") == "ok"]
        known, catalogues = {}, set()
        for r in rows:
            target = caps.target_item(run.bench, cfg, r)
            if target is None or (run.subject, target[0]) not in probed:
                continue
            catalogues.add(target[0])
            known[str(r["sample_id"])] = probed[(run.subject, target[0])].get((target[1], target[2]))
        if not catalogues:
            continue
        outcomes = unit_outcomes(run.bench, cfg, rows, data_dir, cache, quiet=True)
        headline = set(caps.headline_metrics(run.bench))
        for (setting, metric), units in outcomes.groupby(["setting", "metric"], sort=True):
            if metric not in headline:
                continue
            flags = units["sample_id"].astype(str).map(known)
            probed_units = units[flags.notna()]
            g = paired.group_difference(probed_units["value"], flags[flags.notna()].astype(bool),
                                        probed_units["cluster"], n_resamples=resamples, seed=seed)
            out.append({"subject": run.subject, "entry": run.entry, "catalogue": ", ".join(sorted(catalogues)),
                        "setting": setting, "metric": metric, "n_memorized": g.n_in, "n_not_memorized": g.n_out,
                        "n_unprobed": int(len(units) - len(probed_units)), "mean_memorized": g.mean_in,
                        "mean_not_memorized": g.mean_out, "diff": g.diff, "ci_low": g.ci_low, "ci_high": g.ci_high,
                        "n_clusters": g.n_clusters})
    return out


def _num(v: float) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.3f}"


def cells(row: dict) -> list[str]:
    """A split as table cells: subject, entry, setting, metric, memorized (n), not (n), unprobed, difference [CI]
    (``†``: fewer than the clusters a CI needs, or one side empty)."""
    few = few_clusters(row["n_clusters"]) or not (row["n_memorized"] and row["n_not_memorized"])
    diff = (f"{_num(row['diff'])} [{_num(row['ci_low'])}, {_num(row['ci_high'])}]"
            + (f" {FEW}" if few else ""))
    mean = (lambda v: "—" if isinstance(v, float) and math.isnan(v) else f"{v:.3f}")
    return [row["subject"], row["entry"], row["setting"] or "all", row["metric"],
            f"{mean(row['mean_memorized'])} (n={row['n_memorized']})",
            f"{mean(row['mean_not_memorized'])} (n={row['n_not_memorized']})", str(row["n_unprobed"]), diff]


HEADER = ["subject", "entry", "setting", "metric", "memorized", "not memorized", "unprobed", "difference [95% CI]"]
CAPTION = ("Each headline metric over the units whose item the subject's memorization probe reproduced, against "
           "those it did not (units whose item was not probed are left out); the CI resamples whole clusters. "
           f"{FEW}: too few clusters, or a side empty.")
