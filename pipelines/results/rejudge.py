"""``llmrec rejudge RUN --judge JUDGE.yaml``: judge a run's stored subject outputs again, with another judge.

The source run's stored config is the new run's, with the judge replaced (``--judge``: an engine section, or a
mapping with ``judge:`` (one section, or a list: a jury) and optionally ``judging:``), ``--set`` overrides applied
and ``rejudge:`` naming the source run, its config hash, its judge and the stages run again. The samples are built
from the data as in any run (their transient inputs, e.g. a GISTBench history, are not stored), then each takes the
source's stored record without what the judge stages wrote (their fields, their calls, a jury's ``jury``): only the
benchmark's ``judge_stages`` and ``score`` run, through the same Ray Data pipeline, request cache and result store
(a re-run resumes). The subject engine is never started: the run's engines hold no subject role. A sample whose
subject stage failed in the source stays as it was (counted, never sent); one missing from the source is left out.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from llmrec.config import apply_overrides, fingerprint, read_yaml, validate
from llmrec.errors import ConfigError, DataError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import judge_stage_names
from llmrec.pipelines.record import RECORD_FIELDS
from llmrec.pipelines.runner.execution import RunPlan
from llmrec.pipelines.runner.judges import JURY_FIELD
from llmrec.pipelines.results.stored import StoredRun, open_run
from llmrec.rundir import RunDir, refuse_inside_runs
from llmrec.transcripts import TextStore

log = logging.getLogger(__name__)


def _stage_of(name: str | None) -> str:
    """``judge_violate[gpt-j]`` (a juror's call or failure) → ``judge_violate``."""
    return (name or "").split("[", 1)[0]


def refuse_out(out: Path | None, source: str) -> None:
    """``--out`` (the new run directory) is neither the source run nor inside a run directory: a rejudge writes only
    its own run directory (an earlier rejudge's, which it resumes)."""
    if out is None:
        return
    from llmrec import storage

    target = Path(out).expanduser().resolve()
    if not storage.is_uri(source) and target == Path(source).expanduser().resolve():
        raise ConfigError(f"--out {out}: is the source run {source}; a rejudge writes a new run directory (give "
                          "another folder)")
    refuse_inside_runs(target.parent, "--out")  # the folder itself may be this rejudge's own, resumed


def read_judge(path: Path) -> dict[str, Any]:
    """``{"judge": …, "judging": …}`` from a judge file: an engine section, or a mapping with a ``judge:`` key."""
    raw = read_yaml(path)
    if "judge" in raw:
        unknown = sorted(set(raw) - {"judge", "judging"})
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {unknown} beside 'judge' (allowed: judge, judging)")
        return {"judge": raw["judge"], "judging": raw.get("judging")}
    if "type" not in raw:
        raise ConfigError(f"{path}: neither an engine section (no 'type') nor a mapping with a 'judge:' key")
    return {"judge": raw, "judging": None}


def rejudge_config(source: Path, judge_file: Path, overrides: list[str] | None = None, out: Path | None = None,
                   source_uri: str | None = None):
    """The new run's config and the source run's config (both typed; the benchmark must be installed)."""
    from llmrec.pipelines.results.compare import load_run
    from llmrec.pipelines.runner.run_config import RunConfig

    src = load_run(source, source.name)
    bench = src.bench
    if not caps.judge_stages(bench):
        raise ConfigError(f"{source}: benchmark '{bench.name}' declares no judge stages (Judged.judge_stages), "
                          "so there is nothing to judge again")
    stages = judge_stage_names(bench, src.run_config.benchmark)
    if not stages:
        raise ConfigError(f"{source}: its benchmark settings run none of the judge stages of '{bench.name}' "
                          f"({', '.join(caps.judge_stages(bench))}), so there is nothing to judge again")
    raw = src.config
    judge = read_judge(judge_file)
    new = {k: v for k, v in raw.items() if k not in ("judge", "judging", "rejudge")}
    # the MLflow store is this invocation's (--tracking-uri / --set, $MLFLOW_TRACKING_URI, the default), never the one
    # the source directory's config names; whether to log and the experiment's name are kept
    tracking = raw.get("tracking") if isinstance(raw.get("tracking"), dict) else {}
    new["tracking"] = {k: v for k, v in tracking.items() if k not in ("uri", "artifact_root")}
    new["judge"] = judge["judge"]
    if judge["judging"] is not None:
        new["judging"] = judge["judging"]
    new = apply_overrides(new, overrides)
    ex = dict(new.get("execution") or {})
    gpus = ex.get("judge_num_gpus_per_worker")
    if gpus is None:  # the judge's actors kept the subject's GPUs; they keep them, the subject's actors need none
        gpus = ex.get("num_gpus_per_worker") or 0.0
    ex.update(num_gpus_per_worker=0.0, judge_num_gpus_per_worker=gpus, kv_budget_tokens=None)  # no subject to place
    new["execution"] = ex
    output = dict(new.get("output") or {})
    if out is not None:
        output.update(dir=str(Path(out).resolve().parent), run_name=Path(out).name)
    else:
        output["run_name"] = None
    new["output"] = output
    new["rejudge"] = {"source_run": source_uri or str(source.resolve()),
                      "source_config_hash": fingerprint(src.run_config.semantic()),
                      "source_judge": raw.get("judge") if not (raw.get("judging") or {}).get("jurors")
                      else [raw.get("judge"), *raw["judging"]["jurors"]], "stages": stages}
    cfg = validate(RunConfig, new)
    for st in bench.stages(cfg.benchmark):
        if st.name in stages and st.engine != "judge":
            raise ConfigError(f"stage '{st.name}' of this config runs on the {st.engine} engine, not the judge: "
                              "`llmrec rejudge` never starts the subject (set the benchmark to judge it with the "
                              "judge engine)")
    if judge_stage_names(bench, cfg.benchmark) != stages:
        raise ConfigError(f"--set changed which judge stages run ({stages} in the source, "
                          f"{judge_stage_names(bench, cfg.benchmark)} now); rejudge re-runs the source's")
    return cfg, src


class SourceOutputs:
    """Puts a source run's stored subject outputs into a rejudge run's plan (``run_evaluation``'s ``prepare``)."""

    def __init__(self, rows: list[dict], texts: TextStore | None):
        self.rows = {str(r["sample_id"]): r for r in rows}
        self.texts = texts
        self.carried = self.missing = 0

    def __call__(self, p: RunPlan) -> None:
        stages = set(p.config.rejudge.stages)
        subject = {f for st in p.bench.stages(p.config.benchmark) if st.name not in stages for f in st.writes}
        done = p.store.finished_ids()
        samples, carried = [], []
        for s in p.samples:
            src = self.rows.get(str(s["sample_id"]))
            if src is None:
                self.missing += 1
                continue
            # what the sample was built with, what the subject stages wrote, the runner's fields: not what the
            # judge stages wrote, nor what `score` derived from it (score runs again)
            keep = (set(s) | subject | RECORD_FIELDS) - {JURY_FIELD}
            rec = {k: v for k, v in src.items() if k in keep}
            rec["outputs"] = {k: v for k, v in (src.get("outputs") or {}).items() if _stage_of(k) not in stages}
            rec.update({k: v for k, v in s.items() if k.startswith("_")})  # rendering inputs, rebuilt from the data
            if rec.get("status", "ok") != "ok":
                if _stage_of(rec.get("failed_stage")) in stages | {"score", "jury"}:
                    rec.update(status="ok", error=None, failed_stage=None, missing=None)
                else:  # the subject failed: nothing to judge, kept as it was
                    carried.append(rec)
            samples.append(rec)
        if not samples:
            raise DataError(f"{p.config.rejudge.source_run}: none of this config's {len(p.samples)} samples is "
                            "stored there")
        if self.texts is not None and p.texts is not None:  # the subject calls' texts, for `llmrec view`
            p.texts.add(self.texts.get(self.texts.known()))
        self.carried = len(carried)
        stored = p.store.load() if carried else {}
        todo = [c for c in carried if str(c["sample_id"]) not in stored]
        if todo:
            p.store.write([{k: v for k, v in c.items() if not k.startswith("_")} for c in todo])
        carried_ids = {id(c) for c in carried}
        p.samples = samples
        p.pending = [s for s in samples if id(s) not in carried_ids and str(s["sample_id"]) not in done]
        log.info("rejudge: %d samples from %s (%d to judge, %d failed in a subject stage, %d not stored there)",
                 len(samples), p.config.rejudge.source_run, len(p.pending), self.carried, self.missing)


def source_rows(source: StoredRun) -> list[dict]:
    """The source run's stored rows (its result store, else its samples file); none is a ``DataError``."""
    rows = source.stored_rows()
    if not rows:
        raise DataError(f"{source.run_dir}: no stored results ({RunDir.RESULTS}/ or {RunDir.SAMPLES}) to judge again")
    return rows


def run_rejudge(cfg, source: Path, data_dir: Path | None = None, progress=None):
    """Judge the source run's stored subject outputs with ``cfg``'s judge (see the module)."""
    from llmrec import tracking
    from llmrec.pipelines.runner.api import run_evaluation

    src = open_run(source)
    prepare = SourceOutputs(source_rows(src), src.stored_transcripts())
    judges = ", ".join(tracking.model_label(j) for j in ([cfg.judge] + (cfg.judging.jurors if cfg.judging else [])))
    title = f"{cfg.benchmark.name} · {tracking.model_label(cfg.engine)} · rejudged by {judges}"
    return run_evaluation(cfg, data_dir, progress, title=title, prepare=prepare), prepare

