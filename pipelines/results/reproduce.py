"""``llmrec reproduce RUN``: run a seeded random subset of a finished run's samples again, with its own stored config,
and measure whether it comes out the same.

The re-run goes through the public run API (``runner.api.run_evaluation``) into a scratch run directory (``--out``,
default a new temporary folder), with the request cache off (every call reaches the engine), resume off and MLflow
off; the subset is chosen by ``run_evaluation``'s ``prepare`` hook. Then, in this order:

1. every field of the provenance records (``provenance.json``) that differs between the stored run and the re-run
   (other software, model bytes or machine: the first thing to know when outputs differ);
2. the share of engine calls whose outputs are byte-identical: the calls of each sample paired by stage, position
   and role (``llmrec.transcripts.calls``), identical when their output text and finish reason are; every differing
   call is named (sample, stage, role) with where its text first differs;
3. the share of samples whose verdict changed: their status, or any per-unit outcome the benchmark gives
   (``paired_outcomes``: a parsed answer's correctness, a judge's verdict);
4. each headline metric on the subset, re-run − stored, with its paired CI and test (``compare.paired_rows``).

Exit 0 when the share of identical calls is at least ``--threshold`` (default 1.0: every call), else
``EXIT_NOT_REPRODUCED``. A suite's entry is picked with ``--entry``; storage URIs are read like local folders.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from llmrec.cli_options import data_dir_option
from llmrec.errors import ConfigError, DataError, LlmrecError
from llmrec.exits import EXIT_NOT_REPRODUCED
from llmrec.pipelines.results.outcomes import run_outcomes
from llmrec.pipelines.results.stored import StoredRun, open_run, open_runs
from llmrec.rundir import RunDir, dumps_json, refuse_inside_runs
from llmrec.transcripts import calls

DIFF_CONTEXT = 30  # characters of each text shown around where two outputs first differ


class NotReproduced(LlmrecError):
    """The re-run's outputs differ from the stored run's more than ``--threshold`` allows."""

    exit_code = EXIT_NOT_REPRODUCED


@dataclass
class Reproduction:
    source: str
    rerun: str
    sample_ids: list[str]
    provenance_diff: list[dict] = field(default_factory=list)
    calls_total: int = 0
    calls_identical: int = 0
    differing_calls: list[dict] = field(default_factory=list)
    samples_changed: list[dict] = field(default_factory=list)
    metrics: list[dict] = field(default_factory=list)
    not_rebuilt: list[str] = field(default_factory=list)  # chosen samples the data no longer builds

    @property
    def identical_share(self) -> float:
        return self.calls_identical / self.calls_total if self.calls_total else 1.0

    @property
    def changed_share(self) -> float:
        return len(self.samples_changed) / len(self.sample_ids) if self.sample_ids else 0.0


def pick_run(source: str, entry: str | None) -> StoredRun:
    """The run to reproduce: a run directory, or one entry of a suite directory (``--entry``: its entry name, or
    ``<subject>/<entry>``)."""
    runs = [r for r in open_runs([source], needs=(RunDir.CONFIG,)) if r.kind == "llm"]
    if entry is not None:
        runs = [r for r in runs if entry in (r.entry, r.name, r.suite_entry)]
        if not runs:
            raise ConfigError(f"--entry {entry}: no LLM run of that name in {source}")
    if len(runs) != 1:
        raise ConfigError(f"{source}: {len(runs)} runs ({', '.join(r.name for r in runs)}); pick one with --entry")
    run = runs[0]
    if run.run_config.rejudge is not None:
        raise ConfigError(f"{run.path}: a run made by `llmrec rejudge`; reproduce its source run instead")
    return run


def choose(ids: list[str], n: int | None, seed: int) -> list[str]:
    """A seeded random subset of ``n`` sample ids (all of them when ``n`` is None or not smaller), in stored order."""
    if n is None or n >= len(ids):
        return list(ids)
    picked = set(random.Random(seed).sample(sorted(ids), n))
    return [i for i in ids if i in picked]


def rerun_config(run: StoredRun, out_dir: Path, name: str):
    """The stored run's config, writing into ``out_dir``/``name``: no request cache, no resume, no MLflow."""
    cfg = run.run_config
    output = cfg.output.model_copy(update={"dir": str(out_dir), "run_name": name, "cache": False, "resume": False,
                                           "cache_path": None, "transcripts": True})
    tracking = cfg.tracking.model_copy(update={"enabled": False})
    return cfg.model_copy(update={"output": output, "tracking": tracking})


class OnlySamples:
    """``run_evaluation``'s ``prepare``: keeps the chosen samples of the plan (the rest are not run)."""

    def __init__(self, ids: list[str]):
        self.ids = set(ids)
        self.missing: list[str] = []

    def __call__(self, p) -> None:
        built = {str(s["sample_id"]) for s in p.samples}
        self.missing = sorted(self.ids - built)
        p.samples = [s for s in p.samples if str(s["sample_id"]) in self.ids]
        p.pending = [s for s in p.pending if str(s["sample_id"]) in self.ids]
        if not p.samples:
            raise DataError(f"none of the {len(self.ids)} chosen samples is built by the stored config from the data "
                            "now (other data?)")


def _first_difference(a: str, b: str) -> dict:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, i - DIFF_CONTEXT // 3)
    return {"at": i, "stored": a[lo:i + DIFF_CONTEXT], "rerun": b[lo:i + DIFF_CONTEXT]}


def compare_calls(stored: dict[str, dict], rerun: dict[str, dict], ids: list[str]) -> tuple[int, int, list[dict]]:
    """(calls, identical calls, the differing ones) over the samples ``ids``: calls paired by (stage, position,
    role); a call only one side made counts as differing."""
    total = same = 0
    differing = []
    for sid in ids:
        a = {(c.stage, c.index, c.role): {**c.result, "request": c.request} for c in calls(stored.get(sid) or {})}
        b = {(c.stage, c.index, c.role): {**c.result, "request": c.request} for c in calls(rerun.get(sid) or {})}
        for key in sorted(a.keys() | b.keys(), key=str):
            total += 1
            ra, rb = a.get(key), b.get(key)
            what = {"sample_id": sid, "stage": key[0], "index": key[1], "role": key[2]}
            if ra is None or rb is None:
                differing.append({**what, "why": "made only by the " + ("re-run" if ra is None else "stored run")})
                continue
            ta, tb = ra.get("text"), rb.get("text")
            sa, sb = ((c.get("request") or {}).get("sampling") for c in (ra, rb))
            if sa != sb:
                differing.append({**what, "why": f"sent with other sampling ({sa} → {sb})"})
                continue
            if ta == tb and ra.get("finish_reason") == rb.get("finish_reason"):
                same += 1
                continue
            if ta != tb and isinstance(ta, str) and isinstance(tb, str):
                differing.append({**what, "why": "output text differs", **_first_difference(ta, tb)})
            elif ta != tb:
                differing.append({**what, "why": f"output {ta!r} → {tb!r}"})
            else:
                differing.append({**what, "why": f"finish reason {ra.get('finish_reason')} → {rb.get('finish_reason')}"})
    return total, same, differing


def reproduce(source: str, samples: int | None = 20, seed: int = 0, out: Path | None = None,
              entry: str | None = None, data_dir: Path | None = None, resamples: int = 2000) -> Reproduction:
    from llmrec.pipelines.results.compare import paired_rows, provenance_differences
    from llmrec.pipelines.runner.api import run_evaluation

    run = pick_run(source, entry)
    stored = {str(r["sample_id"]): r for r in run.rows}
    ids = choose(list(stored), samples, seed)
    out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="llmrec-reproduce-"))
    refuse_inside_runs(out_dir, "--out")
    name = f"{run.dir.name}-reproduce-seed{seed}"
    keep = OnlySamples(ids)
    outcome = run_evaluation(rerun_config(run, out_dir, name), data_dir, prepare=keep)
    again = open_run(outcome.run_dir)
    rerun = {str(r["sample_id"]): r for r in again.rows}
    ids = [i for i in ids if i not in keep.missing]
    rep = Reproduction(str(run.path), str(outcome.run_dir), ids, not_rebuilt=keep.missing)
    # the sampling a run's calls were sent with is compared call by call below (a subset sends fewer kinds)
    rep.provenance_diff = [d for d in provenance_differences(run, again) if not d["key"].startswith("sampling")]
    rep.calls_total, rep.calls_identical, rep.differing_calls = compare_calls(stored, rerun, ids)
    # verdicts: status, then every per-unit outcome the benchmark gives
    cache: dict = {}
    sub_a = [stored[i] for i in ids]
    sub_b = [rerun[i] for i in ids if i in rerun]
    oa, ob = (run_outcomes(run, data_dir, cache, sub_a, quiet=True),
              run_outcomes(again, data_dir, cache, sub_b, quiet=True))
    keys = ["sample_id", "setting", "metric"]
    merged = oa.merge(ob.drop(columns=["cluster", "statistic"]), on=keys, suffixes=("_a", "_b"))
    moved = set(merged.loc[merged["value_a"] != merged["value_b"], "sample_id"].astype(str))
    for sid in ids:
        a_status, b_status = stored[sid].get("status", "ok"), (rerun.get(sid) or {}).get("status", "missing")
        metrics = sorted(set(merged.loc[(merged["sample_id"].astype(str) == sid)
                                        & (merged["value_a"] != merged["value_b"]), "metric"]))
        if a_status != b_status or sid in moved:
            rep.samples_changed.append({"sample_id": sid, "status": [a_status, b_status], "outcomes": metrics})
    if not merged.empty:
        headline = set(run.headline)
        picked = merged[merged["metric"].isin(headline)] if headline & set(merged["metric"]) else merged
        rep.metrics = paired_rows(run.with_rows(sub_a, name="stored"), again.with_rows(sub_b, name="re-run"), picked,
                                  resamples, seed)
    return rep


def report_text(rep: Reproduction, threshold: float) -> list[str]:
    from llmrec.pipelines.results.compare import _fmt, few_mark, provenance_lines

    lines = [provenance_lines(rep.provenance_diff, True)]  # first: what produced the two
    lines.append(f"re-ran {len(rep.sample_ids)} sample(s) of {rep.source} into {rep.rerun} (no request cache)")
    if rep.not_rebuilt:
        lines.append(f"not re-run (the data no longer builds them): {', '.join(rep.not_rebuilt)}")
    lines.append(f"engine calls byte-identical: {rep.calls_identical} of {rep.calls_total} "
                 f"({rep.identical_share:.1%}; threshold {threshold:.1%})")
    for d in rep.differing_calls:
        where = f"  {d['sample_id']} · {d['stage']}[{d['index']}] ({d['role']}): {d['why']}"
        if "at" in d:
            where += f" at character {d['at']}: {d['stored']!r} → {d['rerun']!r}"
        lines.append(where)
    lines.append(f"samples whose verdict changed: {len(rep.samples_changed)} of {len(rep.sample_ids)} "
                 f"({rep.changed_share:.1%})")
    for s in rep.samples_changed:
        lines.append(f"  {s['sample_id']}: status {s['status'][0]} → {s['status'][1]}"
                     + (f"; outcomes {', '.join(s['outcomes'])}" if s["outcomes"] else ""))
    for r in rep.metrics:
        lines.append(f"{r['metric']} · {r['setting']}: stored {_fmt(r['value_a'], '.3f')}, re-run "
                     f"{_fmt(r['value_b'], '.3f')}, diff {_fmt(r['diff'], '+.3f')} [{_fmt(r['ci_low'], '.3f')}, "
                     f"{_fmt(r['ci_high'], '.3f')}]{few_mark(r)} (n={r['n_pairs']}, test {r['test']})")
    return lines


def register(app: typer.Typer) -> None:
    @app.command("reproduce")
    def reproduce_cmd(
        run: str = typer.Argument(..., help="a run directory, or a suite directory with --entry (local or a storage "
                                            "URI such as s3://…)"),
        samples: int = typer.Option(20, "--samples", min=1, help="how many of its samples to re-run (a seeded "
                                                                 "random subset)"),
        seed: int = typer.Option(0, "--seed", help="seed of the subset (and of the CI's bootstrap)"),
        threshold: float = typer.Option(1.0, "--threshold", min=0.0, max=1.0,
                                        help="exit 0 when at least this share of the engine calls are byte-identical"),
        entry: Optional[str] = typer.Option(None, "--entry", help="a suite's entry (its name, or <subject>/<entry>)"),
        out: Optional[Path] = typer.Option(None, "--out", help="folder of the scratch run directory and "
                                                               "reproduce.json (default: a new temporary folder)"),
        data_dir: Optional[Path] = data_dir_option(),
    ) -> None:
        """Re-run a seeded random subset of a run's samples with its stored config (request cache off) into a
        scratch run directory, then report: the provenance fields that differ, the share of engine calls whose
        outputs are byte-identical (each differing call named), the share of samples whose verdict changed, and the
        headline metrics' difference on the subset with its paired CI. Exits 4 when fewer calls than --threshold
        are identical."""
        from rich.console import Console

        from llmrec import storage
        from llmrec.registry import installed_only

        refuse_inside_runs(out, "--out")
        with storage.local_folders([run]) as (local,):
            with installed_only():
                pick_run(str(local), entry)  # a config that does not validate is named before any work
            rep = reproduce(str(local), samples, seed, out, entry, data_dir)
        rep.source = run
        console = Console()
        for line in report_text(rep, threshold):
            console.print(line, markup=False)
        target = Path(rep.rerun).parent / "reproduce.json"
        target.write_text(dumps_json({**rep.__dict__, "identical_share": rep.identical_share,
                                      "changed_share": rep.changed_share, "threshold": threshold}) + "\n")
        console.print(f"wrote {target}", markup=False)
        if rep.identical_share < threshold:
            raise NotReproduced(f"{rep.calls_total - rep.calls_identical} of {rep.calls_total} engine calls differ "
                                f"from {run} ({rep.identical_share:.1%} identical, below --threshold "
                                f"{threshold:.1%})")

