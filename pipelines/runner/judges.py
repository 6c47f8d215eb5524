"""The judge of a judged benchmark, as the runner handles it: pinned sampling, juries, the judge's protocol record.

- **Pinned sampling**: every request a judge stage sends goes out with ``judging.temperature`` (default 0) and
  ``judging.seed`` (default 0), whatever the stage set (:class:`PinnedJudge`).
- **Jury**: a ``judge:`` list is the first judge (role ``judge``) plus jurors (roles ``judge2``, ``judge3``, …).
  Each juror runs the benchmark's ``judge_stages`` over its own copy of the sample; its fields are kept in the
  record (``jury``: juror label → the fields its judge stages wrote) and its calls in ``outputs`` under
  ``<stage>[<juror>]``. The verdict of each judged decision (``Judged.judge_decisions``) is the majority; a tie
  goes by ``judging.tie`` (``strict``: the benchmark's adverse label, e.g. a violation counts; ``first``: the first
  listed judge that gave one of the tied labels). ``Judged.jury_fields`` turns the verdicts into the judge
  stages' fields, which ``score`` reads as it reads one judge's.
- **Protocol**: the judges' identities, the pinned sampling, the judge prompts' version and the tie rule go into the
  MLflow ``protocol`` tag and into what ``llmrec compare`` checks (``judge_protocol``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llmrec.config import fingerprint, flatten
from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import UNREADABLE, Benchmark, BenchmarkConfig, Sample, Stage, judge_stage_names

log = logging.getLogger(__name__)

JURY_FIELD = "jury"  # the record field holding each juror's judge-stage fields


def juror_roles(n: int) -> list[str]:
    """Engine roles of a jury of ``n``: ``judge``, ``judge2``, ``judge3``, …"""
    return ["judge"] + [f"judge{i}" for i in range(2, n + 1)]


def judge_sections(cfg) -> list[dict]:
    """The run's judge engine sections (one, or a jury's in order); [] without a judge."""
    if cfg.judge is None:
        return []
    jurors = cfg.judging.jurors if cfg.judging is not None else []
    return [cfg.judge.model_dump(mode="json")] + [j.model_dump(mode="json") for j in jurors]


def juror_labels(sections: list[dict]) -> list[str]:
    """A label per judge: its model label, with its position when two judges share one."""
    from llmrec import tracking

    names = [tracking.model_label(s) for s in sections]
    return [f"{n}#{i}" if names.count(n) > 1 else n for i, n in enumerate(names, 1)]


class JudgingSpec(BaseModel):
    """What the workers need to know about the judges, built and checked on the driver and handed to every worker
    as it is (typed across Ray, like the engines' configs): the jury's engine ``roles`` and juror ``labels`` (one
    each: the first judge alone has role ``judge``), the ``tie`` rule, the pinned sampling (``temperature``,
    ``seed``) and (``llmrec rejudge``) the ``only`` stages to run (None: every stage)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    roles: tuple[str, ...]
    labels: tuple[str, ...]
    tie: Literal["strict", "first"] = "strict"
    temperature: float = Field(0.0, ge=0.0)
    seed: int | None = 0
    only: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _a_label_per_role(self) -> JudgingSpec:
        if len(self.labels) != len(self.roles):
            raise ValueError(f"{len(self.labels)} label(s) for {len(self.roles)} judge role(s) {list(self.roles)}")
        return self

    @property
    def jury(self) -> bool:
        """Several judges: the judge stages run once per juror and the verdicts are the jury's."""
        return len(self.roles) > 1


def judging_spec(cfg, bench: Benchmark) -> JudgingSpec | None:
    """What the workers need to know about the judge (a ``JudgingSpec``): the jury's roles, labels and tie rule, the
    pinned sampling, and (``llmrec rejudge``) the only stages to run. Refuses (ConfigError) a jury for a benchmark
    that declares no judge stages or no ``jury_fields``, and a spec that does not validate, naming the field —
    here, on the driver, before any worker starts."""
    sections = judge_sections(cfg)
    judging = cfg.judging
    only = list(cfg.rejudge.stages) if getattr(cfg, "rejudge", None) is not None else None
    if not sections and only is None:
        return None
    if len(sections) > 1:
        if not judge_stage_names(bench, cfg.benchmark):
            raise ConfigError(f"judge: a jury of {len(sections)} judges, but benchmark '{bench.name}' runs no judge "
                              "stage in this config")
        if caps.jury_fields(bench) is None:
            raise ConfigError(f"judge: a jury of {len(sections)} judges, but benchmark '{bench.name}' declares no "
                              "jury_fields (how a jury's verdicts become its judge fields); give one judge")
    spec = {"roles": juror_roles(len(sections)), "labels": juror_labels(sections),
            "tie": judging.tie if judging else "strict",
            "temperature": judging.temperature if judging else 0.0, "seed": judging.seed if judging else 0,
            "only": only}
    try:
        return JudgingSpec.model_validate(spec)
    except ValidationError as e:
        problems = [f"{'.'.join(str(x) for x in err['loc']) or 'spec'}: {err['msg']} (got {err.get('input')!r})"
                    for err in e.errors()]
        raise ConfigError(f"judging of benchmark '{bench.name}': {'; '.join(problems)}") from None


class PinnedJudge:
    """An engine whose requests all go out with the pinned judge sampling (temperature, seed)."""

    def __init__(self, engine, temperature: float, seed: int | None):
        self._engine, self._update = engine, {"temperature": temperature, "seed": seed}

    def generate(self, requests):
        return self._engine.generate([r.model_copy(update={"sampling": r.sampling.model_copy(update=self._update)})
                                      for r in requests])

    def __getattr__(self, name):
        return getattr(self._engine, name)


def pinned(engine, spec: JudgingSpec | None):
    if spec is None:
        return PinnedJudge(engine, 0.0, 0)
    return PinnedJudge(engine, spec.temperature, spec.seed)


def _copy(s: Sample) -> Sample:
    c = dict(s)
    c["outputs"] = dict(s.get("outputs") or {})
    if isinstance(s.get("truncation_steps"), dict):
        c["truncation_steps"] = dict(s["truncation_steps"])
    return c


def verdicts(bench: Benchmark, cfg: BenchmarkConfig, sample: Sample, jury: dict[str, dict],
             tie: str) -> dict[tuple[str, str], Any]:
    """The jury's verdict per (decision, unit): the majority of the jurors that answered it readably (an
    ``UNREADABLE`` answer is no vote); a tie by ``tie``."""
    labels: dict[tuple[str, str], list] = {}
    for fields in jury.values():  # in juror order
        for d in caps.judge_decisions(bench, cfg, {**sample, **fields}):
            if d.label != UNREADABLE:  # a juror whose answer could not be read does not vote
                labels.setdefault((d.decision, d.unit), []).append(d.label)
    out = {}
    for key, given in labels.items():
        counts = Counter(given)
        top = max(counts.values())
        tied = [lab for lab in dict.fromkeys(given) if counts[lab] == top]
        if len(tied) == 1:
            out[key] = tied[0]
        elif tie == "strict" and key[0] in caps.adverse_labels(bench):
            out[key] = caps.adverse_labels(bench)[key[0]]
        else:
            out[key] = tied[0]  # the first juror's (in order) among the tied labels
    return out


def run_jury(bench: Benchmark, cfg: BenchmarkConfig, stages: list[Stage], samples: list[Sample],
             engines: Callable[[str], object], run_stage: Callable, spec: JudgingSpec,
             merge: Callable[[Sample, str, dict], None]) -> None:
    """Run the judge ``stages`` once per juror (each on its own copy of every healthy sample), keep each juror's
    fields and calls, then set the verdict fields (``Judged.jury_fields``) with ``merge``. A juror's failure on
    a sample fails that sample, naming the juror."""
    live = [s for s in samples if s.get("status", "ok") == "ok"]
    writes = [f for st in stages for f in st.writes]
    names = {st.name for st in stages}
    jury: dict[int, dict[str, dict]] = {id(s): {} for s in live}
    for role, label in zip(spec.roles, spec.labels):
        copies = [_copy(s) for s in live]
        engine = pinned(engines(role), spec)
        for stage in stages:
            if not any(c.get("status", "ok") == "ok" for c in copies):
                break
            run_stage(stage, copies, engine)
        for s, c in zip(live, copies):
            for name in names & set(c["outputs"]):
                s.setdefault("outputs", {})[f"{name}[{label}]"] = c["outputs"][name]
            if c.get("status", "ok") != "ok":
                if s.get("status", "ok") == "ok":
                    s["status"], s["error"] = c["status"], f"judge {label}: {c.get('error')}"
                    s["failed_stage"] = f"{c.get('failed_stage')}[{label}]"
                continue
            jury[id(s)][label] = {f: c.get(f) for f in writes if f in c}
    for s in live:
        if s.get("status", "ok") != "ok":
            continue
        s[JURY_FIELD] = jury[id(s)]
        chosen = verdicts(bench, cfg, s, jury[id(s)], spec.tie)
        try:
            fields = caps.jury_fields(bench)(cfg, s, jury[id(s)], chosen)
        except Exception as e:  # noqa: BLE001 - a benchmark bug stays with its sample
            s["status"], s["error"], s["failed_stage"] = "failed", f"jury_fields raised {type(e).__name__}: {e}", "jury"
            continue
        merge(s, "jury", fields)


def judge_protocol(cfg, bench: Benchmark) -> dict | None:
    """The judge part of a run's protocol record: each judge's identity (type, model label, a fingerprint of its
    engine section), the pinned sampling, the judge prompts' version (a fingerprint of every benchmark option that
    names the judge: its templates, mode, token caps; the prompt files' bytes are in the data fingerprint) and a
    jury's tie rule. None when the run has no judge stage."""
    from llmrec import tracking
    from llmrec.redact import redacted

    try:
        stages = judge_stage_names(bench, cfg.benchmark)
    except Exception:  # noqa: BLE001 - stages that need data: the declared names
        stages = list(caps.judge_stages(bench))
    sections = judge_sections(cfg)
    if not stages or not sections:
        return None
    judging = cfg.judging
    bench_opts = {k: v for k, v in flatten(cfg.benchmark.model_dump(mode="json")).items() if "judge" in k}
    out = {"judges": [{"type": s.get("type"), "model": tracking.model_label(s), "id": fingerprint(redacted(s))}
                      for s in sections],
           "sampling": {"temperature": judging.temperature if judging else 0.0, "seed": judging.seed if judging else 0},
           "prompt_version": fingerprint([bench.name, stages, bench_opts])}
    if len(sections) > 1:
        out["tie"] = judging.tie if judging else "strict"
    return out
