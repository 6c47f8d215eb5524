"""The Benchmark protocol: what a benchmark supplies to the generic runner.

(a) ``build_samples`` — data → samples (JSON-able dicts with a stable ``sample_id``);
(b)+(c) ``stages`` — ordered LLM stages, each rendering a request from a sample and
folding the engine's result back into it (multi-stage tasks chain them);
(d) ``score`` — per-sample score fields; (e) ``aggregate`` — rows → metrics;
(f) ``paired_outcomes`` (defaulted) — rows → per-unit metric values ``llmrec compare`` pairs across runs.
``score_tasks`` serve ``llmrec score``. All plain functions: they run without Ray.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmrec.config import StrictModel
from llmrec.pipelines.common.jsonio import PredictionLine
from llmrec.pipelines.record import ASSETS_KEY, Payload, RecordSchema
from llmrec.errors import ConfigError
from llmrec.types import Request, Result

Sample = dict[str, Any]
"""A sample in flight: the runner's record fields, the benchmark's payload fields and its transient ``_`` inputs
(declared and checked: see ``pipelines/record.py``). The shared assets ride under ``ASSETS_KEY``; like every
``_`` key they are dropped before results are stored."""

__all__ = ["ASSETS_KEY", "Payload", "Sample"]


def attach_assets(samples: list[Sample], assets: dict | None) -> list[Sample]:
    """Give every sample (the same, shared) assets dict, as the runner does on a worker.
    For calling stages directly, outside the runner (tests, previews)."""
    if assets is not None:
        for s in samples:
            s[ASSETS_KEY] = assets
    return samples


def sample_assets(sample: Sample) -> dict:
    """The shared assets of a sample; a clear error when a stage runs without them."""
    assets = sample.get(ASSETS_KEY)
    if assets is None:
        raise KeyError(f"sample '{sample.get('sample_id')}' carries no shared assets ('{ASSETS_KEY}'); the runner "
                       "attaches the benchmark's assets(cfg, data_dir) result (outside it: attach_assets)")
    return assets


Verdict = Literal["right", "wrong", "missed", "failed"]
"""A sample's verdict as people read it: ``right`` / ``wrong`` (scored), ``missed`` (answered, but no answer could be
read from it), ``failed`` (no answer: the engine or a stage failed, or the prompt was over the context)."""


class Explanation(BaseModel):
    """One stored sample as people read it (``Benchmark.explain``): the parsed answer and the gold as the benchmark
    means them (words, titles, ranks — not ids or raw floats), the verdict, the reason where there is one (the
    judge's rationale, the parse that failed, the error) and the numbers behind the verdict."""

    model_config = ConfigDict(extra="forbid")

    answer: str | None = None
    gold: str | None = None
    verdict: Verdict | None = Field(None, description="None: the benchmark has no right/wrong for this sample")
    reason: str | None = None
    numbers: dict[str, float | int | bool | str | None] = Field(default_factory=dict)

    def words(self) -> str:
        """The verdict cell: ``wrong — answered C (gold B); correct=False``."""
        head = " — ".join(x for x in (self.verdict, self.reason) if x)
        nums = ", ".join(f"{k}={_number_text(v)}" for k, v in self.numbers.items() if v is not None)
        return "; ".join(x for x in (head, nums) if x)

    def cells(self) -> dict[str, str | None]:
        """The report's drill-down cells ``answer``, ``gold`` and ``verdict`` (in words)."""
        return {"answer": self.answer, "gold": self.gold, "verdict": self.words() or None}


def _number_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if math.isfinite(v) else str(v)
    return str(v)


def choice_verdict(correct: Any, missed: Any = None) -> Verdict | None:
    """The verdict of a scored choice: ``missed`` when no answer was read, else ``right`` / ``wrong``; None when
    the sample was not scored. The one right/wrong/missed rule every benchmark uses."""
    if missed:
        return "missed"
    if correct is None:
        return None
    return "right" if correct else "wrong"


def failed_explanation(row: dict) -> Explanation | None:
    """A sample that did not finish (status failed / over_context) as ``failed`` with its error as the reason;
    None for an answered one."""
    status = row.get("status") or "ok"
    if status == "ok":
        return None
    why = row.get("error") or ("the prompt is over the engine's context" if status == "over_context" else status)
    stage = row.get("failed_stage")
    return Explanation(verdict="failed", reason=f"{status}{f' in {stage}' if stage else ''}: {why}",
                       answer=_last_output(row))


def _last_output(row: dict) -> str | None:
    last = list((row.get("outputs") or {}).values())[-1:]
    results = last[0] if last and isinstance(last[0], list) else last
    text = results[-1].get("text") if results and isinstance(results[-1], dict) else None
    return text if isinstance(text, str) else None


def as_words(value: Any) -> str | None:
    """A stored value as a cell's text: None stays None, a list is comma-separated, anything else ``str``."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


class BenchmarkConfig(StrictModel):
    """Fields every benchmark config has; each benchmark subclasses it."""

    name: str = Field(description="benchmark (a package under pipelines/benchmarks/)")
    limit: int | None = Field(None, ge=1, description="keep only the first N samples (smoke runs)")


@dataclass(frozen=True)
class LLMStage:
    """One model call per sample.

    ``render(sample) -> Request | None`` (None: this sample skips the stage; ``sample`` is a read-only view);
    ``accept(sample, result) -> dict`` returns the fields to merge into the sample.
    ``engine`` picks the configured engine: ``"subject"`` or ``"judge"``.
    ``shrink(sample, request, result) -> Request | None``: optional truncation policy,
    called when a request is over the engine's context; return a smaller request to try
    instead, or None to record the sample as ``over_context`` (the default: never truncate).
    ``reads``: record / payload fields or transient keys the stage reads (declared fields, checked at
    registration; on entry a sample lacking one fails with the stage, its ``sample_id`` and the missing keys);
    ``writes``: the payload fields ``accept`` (and ``shrink``) may set. The runner validates what ``accept``
    returns against the payload's field types; an undeclared key or a wrong type fails that sample naming
    the field path.
    """

    name: str
    render: Callable[[Sample], Request | None]
    accept: Callable[[Sample, Result], dict]
    engine: Literal["subject", "judge"] = "subject"
    shrink: Callable[[Sample, Request, Result], Request | None] | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopStage:
    """Several rounds of model calls per sample, each round depending on the last
    (e.g. pairwise heapsort: which pair to compare next depends on earlier answers).

    ``next_requests(sample) -> list[Request]`` returns the next round (empty: done; ``sample`` is read-only);
    ``accept(sample, requests, results) -> dict`` merges that round's results into the
    sample (keep what later rounds need, e.g. a memo of answered comparisons, in it).
    The runner loops until every sample returns an empty round or ``max_rounds`` is hit.
    ``reads`` / ``writes``: as for ``LLMStage``.
    """

    name: str
    next_requests: Callable[[Sample], list[Request]]
    accept: Callable[[Sample, list[Request], list[Result]], dict]
    engine: Literal["subject", "judge"] = "subject"
    max_rounds: int = 64
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


Stage = LLMStage | LoopStage


@dataclass(frozen=True)
class JudgeDecision:
    """One decision a judge made about one stored sample (``Benchmark.judge_decisions``): ``decision`` names the
    question (PrefEval: ``violate``), ``unit`` what it was asked about within the sample ("" when the sample is
    the unit; GISTBench: ``interest|object``), ``label`` the judge's answer (a bool, a str or an int). Two judges
    agree on a unit when their labels for the same (sample, decision, unit) are equal. A judge answer that could
    not be read is labelled :data:`UNREADABLE`, never given a default label."""

    decision: str
    unit: str
    label: bool | str | int


UNREADABLE = "unreadable"
"""The label of a judged decision whose judge answer could not be read (``JudgeDecision``): its own outcome in
agreement statistics (counted and shown) and no vote in a jury."""


@dataclass(frozen=True)
class Outcome:
    """One per-unit result of a headline metric, the unit ``llmrec compare`` pairs across runs.

    ``sample_id`` names the unit (a sample, or a user / group for metrics computed per group) and is
    the join key between runs; ``setting`` is the unit's setting (``setting_label``: the benchmark's
    ``group_keys`` as ``key=value,…``); ``cluster`` is the resampling unit of the paired bootstrap and
    permutation test (units of one cluster, e.g. one user's samples, are resampled / swapped together);
    ``statistic`` is how the metric summarizes the units: ``mean`` (the metric is the mean of the
    values) or ``median``."""

    sample_id: str
    setting: str
    cluster: str
    metric: str
    value: float
    statistic: Literal["mean", "median"] = "mean"


def setting_label(keys: Iterable[str], row: dict) -> str:
    """``k1=v1,k2=v2`` over ``keys`` (the name of a setting's MLflow child run, after the run name)."""
    return ",".join(f"{k}={row.get(k)}" for k in keys)


def setting_of(bench: "Benchmark", row: dict) -> str:
    """The label of a stored sample's setting: its record's ``setting`` mapping (rows stored before the record had
    one: the benchmark's ``group_keys`` read from the row)."""
    setting = row.get("setting")
    if not isinstance(setting, dict):
        return setting_label(bench.group_keys, row)
    keys = [k for k in bench.group_keys if k in setting] + [k for k in setting if k not in bench.group_keys]
    return setting_label(keys, setting)  # in group_keys order (a stored mapping may come back key-sorted)


def outcomes_from_fields(bench: "Benchmark", rows: list[Sample], fields: dict[str, str],
                         cluster: Callable[[Sample], Any] | None = None,
                         statistic: Literal["mean", "median"] = "mean") -> list[Outcome]:
    """Outcomes read from per-sample fields that ``score`` wrote: ``fields`` maps a headline metric to
    the field whose mean over answered samples (status ok) the metric is, e.g. ``{"accuracy": "correct"}``.
    A missing, None or non-finite field gives no outcome for that sample (e.g. an unparsable answer a
    metric leaves out). ``cluster(row)``: the resampling unit (default: the benchmark's ``cluster`` hook)."""
    cluster = cluster or bench.cluster
    out = []
    for r in rows:
        if r.get("status", "ok") != "ok":
            continue
        for metric, field in fields.items():
            v = r.get(field)
            if v is None or isinstance(v, str):
                continue
            v = float(v)
            if math.isfinite(v):
                out.append(Outcome(str(r["sample_id"]), setting_of(bench, r), str(cluster(r)), metric, v, statistic))
    return out


def prediction_lines(line: type[PredictionLine], rows: Iterable[Sample]) -> list[dict]:
    """Rows as lines of a predictions file whose schema is ``line``: each row's value of every field the
    model declares, in the model's field order (None where the row has none). For ``Benchmark.predictions``
    whose lines are the row's own fields, so the keys are written once, on the model."""
    keys = tuple(line.model_fields)
    return [{k: r.get(k) for k in keys} for r in rows]


@dataclass(frozen=True)
class ScoreTask:
    """``llmrec score NAME``: recompute metrics from a predictions file without a model.

    ``line`` is the schema every line must match (``common.jsonio.PredictionLine``: types, allowed
    values, the fields that identify a line); ``run(lines, options) -> metrics``. ``streams``: ``run``
    reads ``lines`` once, in order, so they are given as an iterator over the file (memory flat in its
    length) instead of a list. ``option_schema``: a model of the options' types and ranges (each field one of
    ``options``, with its default and description); ``llmrec score`` checks the given values against it, before
    the file is read, and hands ``run`` the checked values.
    """

    name: str
    line: type[PredictionLine]
    run: Callable[[list[dict], dict], dict[str, Any]]
    description: str = ""
    options: tuple[str, ...] = ()
    streams: bool = False
    option_schema: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        extra = sorted(set(self.option_schema.model_fields) - set(self.options)) if self.option_schema else []
        if extra:
            raise ValueError(f"score task {self.name!r}: option_schema fields {extra} are not among its options "
                             f"{list(self.options)}")

    def checked_options(self, given: dict, flag: Callable[[str], str] = str) -> dict:
        """``given`` options checked against ``option_schema`` (values as typed, or as the text ``--option``
        gives): every option of the schema, the given ones converted, the others at their defaults. A wrong
        type or a value out of range is one ``ConfigError`` naming the option (as ``flag`` spells it), the
        value and what it allows. Without a schema: ``given`` unchanged."""
        if self.option_schema is None:
            return dict(given)
        try:
            return self.option_schema.model_validate(given).model_dump()
        except ValidationError as e:
            problems = []
            for err in e.errors():
                key = str(err["loc"][0]) if err["loc"] else "?"
                field = self.option_schema.model_fields.get(key)
                allowed = f" ({field.description})" if field is not None and field.description else ""
                if err["type"] == "missing":
                    problems.append(f"{flag(key)} is required{allowed}")
                else:
                    problems.append(f"{flag(key)}={given.get(key)!r}: {err['msg'].removeprefix('Value error, ')}"
                                    f"{allowed}")
            raise ConfigError(f"score task '{self.name}': " + "; ".join(problems)) from None

    def describe_options(self) -> str:
        """``confidence (…; default 0.95), seed (…)``: the options as ``llmrec list`` shows them."""
        fields = self.option_schema.model_fields if self.option_schema is not None else {}
        out = []
        for name in self.options:
            f = fields.get(name)
            default = "" if f is None or f.is_required() or f.default is None else f"; default {f.default}"
            out.append(f"{name} ({f.description}{default})" if f is not None and f.description else name)
        return ", ".join(out)


Ranker = Callable[[list[str], list[list[str]]], list[list[str]]]
"""A trained recommender as ``Benchmark.ranking_baselines`` sees it: users (raw ids) and each one's
candidates (raw item ids) → each user's candidates, best first."""


@dataclass(frozen=True)
class RankingBaselines:
    """What trained recommenders need to rank a benchmark's own candidates (``Benchmark.ranking_baselines``).

    ``data`` and ``filters``: the interaction-layer sections (a ``llmrec train`` config's ``data`` /
    ``filters``) whose leave-one-out split holds out the target each sample asks for; ``rows(rank)``: the
    samples' candidates ranked by ``rank`` → rows ``aggregate`` takes, each keeping its sample's
    ``sample_id`` and setting fields (a baseline's row stands beside the LLM's row of the same sample)."""

    data: dict[str, Any]
    filters: dict[str, Any]
    rows: Callable[[Ranker], list[Sample]]


@dataclass(frozen=True)
class DataFile:
    path: str  # relative to the data directory
    url: str
    sha256: str


@dataclass(frozen=True)
class DataManifest:
    """Files a benchmark reads, with where ``llmrec data fetch`` gets them."""

    name: str
    source: str
    files: tuple[DataFile, ...]
    probe: str  # a relative path whose presence means "the data is here"


class Benchmark:
    """Base class of every benchmark: what the runner calls, the optional members declared with defaults.

    Required (no default): ``name``, ``config_cls`` (a ``BenchmarkConfig`` subclass), ``payload`` (a
    ``Payload`` subclass: every per-sample field, typed), ``group_keys`` (payload fields that split results
    and MLflow child runs), ``score_tasks``, and the methods
    ``build_samples``, ``stages``, ``score``, ``aggregate``. :func:`check_benchmark` verifies them
    (and every signature) at discovery, so a benchmark that does not conform fails at ``llmrec list``,
    before any model call.

    Optional, with these defaults: ``transient`` (the ``_`` keys ``build_samples`` sets for rendering
    only, never stored); ``data`` (the files ``llmrec data fetch`` gets); ``cli`` (a
    typer.Typer mounted as ``llmrec <name> ...``); ``protocol_keys`` (config keys recorded in the MLflow
    ``protocol`` tag: every option that changes what is measured); ``headline_metrics`` (shown by ``llmrec
    runs`` and pinned in the MLflow UI); ``predictions`` (the lines of ``predictions.jsonl`` for ``llmrec
    score``; None: no file); ``baselines`` (traditional baselines scored on the same samples without a
    model, e.g. a user's average rating: ``baselines(cfg, samples, assets)`` returns label → rows that
    ``aggregate`` takes; None: none; a suite lists them beside its subjects); ``ranking_baselines``
    (trained recommenders on the samples' own candidates: ``ranking_baselines(cfg, samples, assets)`` returns
    a ``RankingBaselines``, or None when this config has no candidates; a suite trains the models its entry
    names on that data and lists each beside its subjects; None: the benchmark ranks no candidates);
    ``assets`` (read-only data every sample's stages share, e.g. a corpus or
    prompt files, read once on the driver: the runner puts it in the Ray object store once, hands it to
    stages as ``sample[ASSETS_KEY]`` and to ``aggregate`` / ``predictions`` / ``plots``. Stages never read
    files: on a cluster the data directory exists only where the driver runs); ``plots`` (none);
    ``drilldown`` (one stored sample as ``llmrec report`` shows it: the ``DRILLDOWN_FIELDS``);
    ``explain`` (one stored sample as people read it: answer, gold, verdict right / wrong / missed / failed, reason
    and the numbers behind it — what ``llmrec view`` filters by and the report's cells show);
    ``cluster_key`` / ``cluster`` (the resampling unit of ``llmrec compare``'s paired tests: a declared field
    whose value is a row's cluster, e.g. its user; or a method for a unit made of several fields; default: each
    sample alone); ``paired_outcomes`` (what ``llmrec compare`` pairs across runs: see the method).
    ``protocol_keys``, ``group_keys`` and ``cluster_key`` are checked at registration: a name that is not a
    config field (protocol keys) or a declared record field (the others) fails naming it and what is available.
    """

    name: str
    config_cls: type[BenchmarkConfig]
    payload: type[Payload]
    group_keys: tuple[str, ...]
    score_tasks: tuple[ScoreTask, ...]
    transient: tuple[str, ...] = ()
    data: DataManifest | None = None
    cli: Any = None
    protocol_keys: tuple[str, ...] = ()
    headline_metrics: tuple[str, ...] = ()
    cluster_key: str | None = None
    predictions: Callable[[list[Sample], dict | None], list[dict]] | None = None
    baselines: Callable[[BenchmarkConfig, list[Sample], dict | None], dict[str, list[Sample]]] | None = None
    ranking_baselines: (Callable[[BenchmarkConfig, list[Sample], dict | None], RankingBaselines | None]
                        | None) = None
    judge_stages: tuple[str, ...] = ()
    judged_metrics: tuple[str, ...] = ()
    """Headline metrics a judge decides: each is shown with the run's judge failure rate beside it
    (``runner/judge_failures.py``: ``aggregate`` writes ``judge_failure_rate``, ``judge_failed``, ``n_judged``)."""
    adverse_labels: dict[str, Any] = {}
    jury_fields: Callable[[BenchmarkConfig, Sample, dict[str, dict], dict[tuple[str, str], Any]], dict] | None = None
    absent_text: str | None = None
    """What a leaderboard cell says for a subject without a run of this benchmark beside its others (e.g. a probe's
    "not probed"); None: the usual ``—``."""

    def entry_label(self, config: dict) -> str:
        """The leaderboard's entry name for a plain run directory of this benchmark, from its stored config
        (``benchmark`` section; a suite names its entries itself). Default: the benchmark's name."""
        return self.name

    def judge_decisions(self, cfg: BenchmarkConfig, row: Sample) -> list[JudgeDecision]:
        """The judged decisions of one stored row (what ``llmrec judges`` pairs between two judges), read from the
        fields the ``judge_stages`` wrote and ``score`` derived. Default: none."""
        return []

    def judge_failures(self, cfg: BenchmarkConfig, row: Sample) -> tuple[int, int]:
        """(judged units whose judge answer could not be read, judged units) of one stored row: what
        ``judge_failure_rate`` counts, for a subset of a run's rows (``llmrec compare``, ``llmrec judges``).
        Default: (0, 0), nothing judged."""
        return 0, 0

    def build_samples(self, cfg: BenchmarkConfig, data_dir: Path) -> list[Sample]:
        raise NotImplementedError

    def stages(self, cfg: BenchmarkConfig) -> list[Stage]:
        raise NotImplementedError

    def score(self, cfg: BenchmarkConfig, sample: Sample) -> dict:
        raise NotImplementedError

    def aggregate(self, cfg: BenchmarkConfig, rows: list[Sample], assets: dict | None) -> dict[str, float]:
        raise NotImplementedError

    def assets(self, cfg: BenchmarkConfig, data_dir: Path) -> dict | None:
        return None

    def plots(self, cfg: BenchmarkConfig, rows: list[Sample], out_dir: Path, assets: dict | None) -> list[Path]:
        return []

    def drilldown(self, row: Sample, assets: dict | None) -> dict[str, Any]:
        """One stored sample (a ``samples.parquet`` row, nested values decoded) for the report's per-sample table:
        ``prompt`` (what the model was asked, or the inputs its prompt is built from), ``answer``, ``gold`` and
        ``verdict`` (the score or the judge's verdict). Values: text, numbers, JSON-able lists/dicts, or None.
        ``assets``: the benchmark's assets where the caller has them, else None (``llmrec report`` reads only
        the run directory). Default: the sample's own ``prompt`` / ``gold`` / ``verdict`` (else ``correct``)
        fields, and as answer its ``answer`` / ``output`` field, else the text of its last stage's output."""
        answer = row.get("answer", row.get("output"))
        if answer is None:
            answer = _last_output(row)
        return {"prompt": row.get("prompt"), "answer": answer, "gold": row.get("gold"),
                "verdict": row.get("verdict", row.get("correct"))}

    def cluster(self, row: Sample) -> str:
        """The resampling unit of a stored row for ``llmrec compare`` (units of one cluster are resampled /
        swapped together): its ``cluster_key`` field, else the sample itself."""
        return str(row[self.cluster_key] if self.cluster_key is not None else row["sample_id"])

    def explain(self, row: Sample) -> Explanation | None:
        """One stored sample (a ``samples.parquet`` row, nested values decoded; no assets: a reader of results has
        only the run directory) as people read it. Default: ``failed`` with its error when the sample did not
        finish; else right / wrong / missed from its ``correct`` / ``missed`` fields (:func:`choice_verdict`),
        the answer its ``answer`` / ``output`` field (else its last call's text), the gold its ``gold``."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        answer = row.get("answer", row.get("output"))
        return Explanation(answer=as_words(answer if answer is not None else _last_output(row)),
                           gold=as_words(row.get("gold")), verdict=choice_verdict(row.get("correct"), row.get("missed")),
                           numbers={k: row[k] for k in ("correct", "missed") if row.get(k) is not None})

    def paired_outcomes(self, cfg: BenchmarkConfig, rows: list[Sample], assets: dict | None) -> list[Outcome]:
        """Per-unit values of the headline metrics, for ``llmrec compare`` (one ``Outcome`` per unit,
        setting and metric). Default: every headline metric that is also a per-sample field ``score``
        wrote (its mean over answered samples is the metric), clustered by ``cluster``. Override it
        to map a metric to its field (``outcomes_from_fields``) or to give per-group units for metrics
        computed per group. Metrics with no outcome (counts such as ``failed``, set-level metrics such as
        a coverage) are not compared."""
        return outcomes_from_fields(self, rows, {m: m for m in self.headline_metrics})


_REQUIRED = ("name", "config_cls", "payload", "group_keys", "score_tasks")
_REQUIRED_METHODS = ("build_samples", "stages", "score", "aggregate")
_ARITY = {"build_samples": 2, "stages": 1, "score": 2, "aggregate": 3, "assets": 2, "plots": 4, "predictions": 2,
          "drilldown": 2, "cluster": 1, "explain": 1, "paired_outcomes": 3,
          "baselines": 3, "ranking_baselines": 3, "judge_decisions": 2, "jury_fields": 4,
          "judge_failures": 2}
DRILLDOWN_FIELDS = ("prompt", "answer", "gold", "verdict")
"""The keys ``Benchmark.drilldown`` returns."""


def check_benchmark(bench: object, where: str) -> None:
    """Fail naming every member ``bench`` lacks or gets wrong (a ConfigError, one line)."""
    problems = []
    if not isinstance(bench, Benchmark):
        problems.append(f"not a subclass of {Benchmark.__module__}.Benchmark")
    missing = [m for m in _REQUIRED if not hasattr(bench, m)]
    missing += [m for m in _REQUIRED_METHODS if getattr(type(bench), m, None) in (None, getattr(Benchmark, m))]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    problems += _member_problems(bench, missing)
    if not problems:
        problems += record_schema(bench).problems()
        problems += _key_problems(bench)
        problems += _default_stage_problems(bench)
    if problems:
        kind = type(bench)
        raise ConfigError(f"benchmark {where} ({kind.__module__}.{kind.__qualname__}) does not conform to the protocol: "
                          f"{'; '.join(problems)}")


def _key_problems(bench) -> list[str]:
    """Names the benchmark gives as keys: group and cluster keys among its declared record fields, protocol
    keys among its config's fields (a typo would otherwise drop the option from the protocol record)."""
    fields = record_schema(bench).fields
    out = [f"group key '{k}' is not a declared field" for k in bench.group_keys if k not in fields]
    if bench.cluster_key is not None and bench.cluster_key not in fields:
        out.append(f"cluster_key '{bench.cluster_key}' is not a declared field")
    options = bench.config_cls.model_fields
    out += [f"protocol key '{k}' is not a field of {bench.config_cls.__name__} (fields: {', '.join(options)})"
            for k in bench.protocol_keys if k not in options]
    return out


def _member_problems(bench, missing: list[str]) -> list[str]:
    out = []
    for attr, want, ok in (("name", "a str", lambda v: isinstance(v, str)),
                           ("config_cls", "a BenchmarkConfig subclass",
                            lambda v: isinstance(v, type) and issubclass(v, BenchmarkConfig)),
                           ("payload", "a Payload subclass (pipelines/record.py)",
                            lambda v: isinstance(v, type) and issubclass(v, Payload)),
                           ("transient", "a tuple of str", _str_tuple),
                           ("group_keys", "a tuple of str", _str_tuple),
                           ("protocol_keys", "a tuple of str", _str_tuple),
                           ("headline_metrics", "a tuple of str", _str_tuple),
                           ("judge_stages", "a tuple of str", _str_tuple),
                           ("judged_metrics", "a tuple of str", _str_tuple),
                           ("adverse_labels", "a dict", lambda v: isinstance(v, dict)),
                           ("cluster_key", "a str or None", lambda v: v is None or isinstance(v, str)),
                           ("score_tasks", "a tuple of ScoreTask",
                            lambda v: isinstance(v, tuple) and all(isinstance(t, ScoreTask) for t in v)),
                           ("data", "a DataManifest or None", lambda v: v is None or isinstance(v, DataManifest))):
        if attr not in missing and hasattr(bench, attr) and not ok(getattr(bench, attr)):
            out.append(f"{attr} must be {want}")
    for meth, n in _ARITY.items():  # each is called with n positional arguments
        fn = getattr(bench, meth, None)
        if meth in missing or (fn is None and meth in ("predictions", "baselines", "ranking_baselines",
                                                       "jury_fields")):  # None: no file / none
            continue
        if not callable(fn):
            out.append(f"{meth} must be callable")
            continue
        try:
            inspect.signature(fn).bind(*[None] * n)
        except TypeError:
            out.append(f"{meth}{inspect.signature(fn)} must take {n} positional argument(s)")
    return out


def record_schema(bench: Benchmark) -> RecordSchema:
    """The benchmark's declared record (built once per benchmark object)."""
    schema = bench.__dict__.get("_record_schema")
    if schema is None:
        schema = RecordSchema(bench.payload, bench.transient, bench.name)
        bench.__dict__["_record_schema"] = schema
    return schema


def stage_problems(bench: Benchmark, cfg: BenchmarkConfig) -> list[str]:
    """Each stage's ``reads`` / ``writes`` against the benchmark's declared record, for this config."""
    schema = record_schema(bench)
    return [p for stage in bench.stages(cfg) for p in schema.stage_problems(stage)]


def check_stages(bench: Benchmark, cfg: BenchmarkConfig) -> None:
    """Fail (ConfigError) before any model call when a stage reads or writes an undeclared field."""
    problems = stage_problems(bench, cfg)
    if problems:
        raise ConfigError(f"benchmark '{bench.name}': {'; '.join(problems)}")


def judge_stage_names(bench: Benchmark, cfg: BenchmarkConfig) -> list[str]:
    """The benchmark's ``judge_stages`` that this config runs, in stage order."""
    return [s.name for s in bench.stages(cfg) if s.name in bench.judge_stages]


def _default_stage_problems(bench: Benchmark) -> list[str]:
    """At registration: the stages of the benchmark's default config (when its config has defaults for
    every field; ``plan`` checks the run's own config again)."""
    try:
        cfg = bench.config_cls.model_validate({"name": bench.name})
        return stage_problems(bench, cfg)
    except Exception:  # noqa: BLE001 - a config with required fields (or stages that need data) is checked at plan
        return []


def _str_tuple(v) -> bool:
    return isinstance(v, tuple) and all(isinstance(x, str) for x in v)


def protocol_record(bench: Benchmark, cfg: BenchmarkConfig) -> dict[str, Any]:
    """The config keys a run records in its MLflow ``protocol`` tag: the benchmark's ``protocol_keys``
    (the options that change what is measured, e.g. a deliberate difference from the reference)."""
    return {k: v for k, v in cfg.model_dump(mode="json").items() if k in bench.protocol_keys}
