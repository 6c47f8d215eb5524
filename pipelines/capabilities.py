"""Opt-in capabilities of a benchmark: what it may do beyond the core (``pipelines/core.py``).

A benchmark subclasses the core ``Benchmark`` and only the capabilities it uses, e.g.
``class PrefEval(Benchmark, Aggregates, Presents, Judged, ...)``. Each capability is a small mixin whose
members carry the documented default, so declaring one and overriding only some of its members is enough.
A benchmark that does not declare a capability has none of its members: callers reach them through the
accessors below (``capabilities.explain(bench, row)``), which give such a benchmark the capability's default —
exactly what a benchmark declaring it without overriding anything gets. :data:`CAPABILITIES` lists each
capability's members and what they must be; ``conformance.check_benchmark`` checks them at registration.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal

from llmrec.pipelines.explanation import Explanation, as_words, choice_verdict, failed_explanation, last_output
from llmrec.pipelines.parts import (BenchmarkConfig, DataManifest, JudgeDecision, Outcome, RankingBaselines,
                                    Sample)
from llmrec.pipelines.score_task import ScoreTask

if TYPE_CHECKING:
    from llmrec.pipelines.core import Benchmark

DRILLDOWN_FIELDS = ("prompt", "answer", "gold", "verdict")
"""The keys ``Explains.drilldown`` returns."""


class HasTransient:
    """``transient``: the ``_`` keys ``build_samples`` sets for rendering only, never stored (declared and
    checked: see ``pipelines/record.py``). Default: none."""

    transient: tuple[str, ...] = ()


class HasData:
    """``data``: the files ``llmrec data fetch`` gets (a ``DataManifest``). Default: None (nothing to fetch)."""

    data: DataManifest | None = None


class HasCli:
    """``cli``: a typer.Typer mounted as ``llmrec <name> ...`` (an attribute, or a property that builds it
    lazily). Default: None (no sub-command)."""

    cli: Any = None


class HasAssets:
    """Read-only data every sample's stages share (e.g. a corpus or prompt files), read once on the driver: the
    runner puts it in the Ray object store once, hands it to stages as ``sample[ASSETS_KEY]`` and to ``aggregate``
    / ``predictions`` / ``plots``. Stages never read files: on a cluster the data directory exists only where the
    driver runs. Default: None."""

    def assets(self, cfg: BenchmarkConfig, data_dir: Path) -> dict | None:
        return None


class Aggregates:
    """Rows → metrics, per setting. ``group_keys``: payload fields that split results and MLflow child runs
    (default: none, one setting); ``aggregate(cfg, rows, assets)``: the metrics of a setting's rows (default: the
    counts ``n_samples``, ``failed`` and ``over_context``)."""

    group_keys: tuple[str, ...] = ()

    def aggregate(self, cfg: BenchmarkConfig, rows: list[Sample], assets: dict | None) -> dict[str, float]:
        status = [r.get("status", "ok") for r in rows]
        return {"n_samples": float(len(rows)), "failed": float(status.count("failed")),
                "over_context": float(status.count("over_context"))}


class HasScoreTasks:
    """``llmrec score``: ``score_tasks`` (each a ``ScoreTask``: recompute metrics from a predictions file without a
    model; default: none) and ``predictions(rows, assets)`` (the lines of the run's ``predictions.jsonl`` those
    tasks read; None: no file)."""

    score_tasks: tuple[ScoreTask, ...] = ()
    predictions: Callable[[list[Sample], dict | None], list[dict]] | None = None


class Presents:
    """How results are shown and recorded. ``headline_metrics`` (shown by ``llmrec runs`` and pinned in the MLflow
    UI; default none); ``protocol_keys`` (config keys recorded in the MLflow ``protocol`` tag: every option that
    changes what is measured; default none); ``plots(cfg, rows, out_dir, assets)`` (the run's figures; default
    none); ``entry_label(config)`` (a leaderboard's entry name for a plain run of this benchmark); ``absent_text``
    (what a leaderboard cell says for a subject without a run of this benchmark beside its others, e.g. a probe's
    "not probed"; None: the usual ``—``)."""

    headline_metrics: tuple[str, ...] = ()
    protocol_keys: tuple[str, ...] = ()
    absent_text: str | None = None

    def plots(self, cfg: BenchmarkConfig, rows: list[Sample], out_dir: Path, assets: dict | None) -> list[Path]:
        return []

    def entry_label(self, config: dict) -> str:
        """The leaderboard's entry name for a plain run directory of this benchmark, from its stored config
        (``benchmark`` section; a suite names its entries itself). Default: the benchmark's name."""
        return self.name  # type: ignore[attr-defined]  # the core's name


class Judged:
    """Stages a judge model runs, and what ``llmrec judges`` / ``llmrec compare`` / juries read of them.

    ``judge_stages`` (the stages whose engine is the judge and whose decisions are compared between judges);
    ``judged_metrics`` (headline metrics a judge decides: each is shown with the run's judge failure rate beside
    it — ``aggregate`` writes ``judge_failure_rate``, ``judge_failed``, ``n_judged``); ``adverse_labels`` (per
    decision, the label a strict jury's tie takes); ``jury_fields(cfg, sample, jurors, chosen)`` (a jury's fields
    from its jurors' answers; None: no jury); ``judge_decisions(cfg, row)`` and ``judge_failures(cfg, row)``.
    Default: nothing judged."""

    judge_stages: tuple[str, ...] = ()
    judged_metrics: tuple[str, ...] = ()
    adverse_labels: dict[str, Any] = {}
    jury_fields: Callable[[BenchmarkConfig, Sample, dict[str, dict], dict[tuple[str, str], Any]], dict] | None = None

    def judge_decisions(self, cfg: BenchmarkConfig, row: Sample) -> list[JudgeDecision]:
        """The judged decisions of one stored row (what ``llmrec judges`` pairs between two judges), read from the
        fields the ``judge_stages`` wrote and ``score`` derived. Default: none."""
        return []

    def judge_failures(self, cfg: BenchmarkConfig, row: Sample) -> tuple[int, int]:
        """(judged units whose judge answer could not be read, judged units) of one stored row: what
        ``judge_failure_rate`` counts, for a subset of a run's rows (``llmrec compare``, ``llmrec judges``).
        Default: (0, 0), nothing judged."""
        return 0, 0


class HasBaselines:
    """Baselines a suite lists beside its subjects. ``baselines(cfg, samples, assets)``: traditional baselines
    scored on the same samples without a model (e.g. a user's average rating), label → rows ``aggregate`` takes;
    ``ranking_baselines(cfg, samples, assets)``: a ``RankingBaselines`` (trained recommenders on the samples' own
    candidates; None when this config has no candidates). Default: None, none."""

    baselines: Callable[[BenchmarkConfig, list[Sample], dict | None], dict[str, list[Sample]]] | None = None
    ranking_baselines: (Callable[[BenchmarkConfig, list[Sample], dict | None], RankingBaselines | None]
                        | None) = None


class Explains:
    """One stored sample (a ``samples.parquet`` row, nested values decoded) as people read it: ``explain(row)`` for
    ``llmrec view`` and the report's cells, ``drilldown(row, assets)`` for the report's per-sample table."""

    def explain(self, row: Sample) -> Explanation | None:
        """No assets: a reader of results has only the run directory. Default: ``failed`` with its error when the
        sample did not finish; else right / wrong / missed from its ``correct`` / ``missed`` fields
        (:func:`choice_verdict`), the answer its ``answer`` / ``output`` field (else its last call's text), the
        gold its ``gold``."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        answer = row.get("answer", row.get("output"))
        return Explanation(answer=as_words(answer if answer is not None else last_output(row)),
                           gold=as_words(row.get("gold")), verdict=choice_verdict(row.get("correct"), row.get("missed")),
                           numbers={k: row[k] for k in ("correct", "missed") if row.get(k) is not None})

    def drilldown(self, row: Sample, assets: dict | None) -> dict[str, Any]:
        """The ``DRILLDOWN_FIELDS``: ``prompt`` (what the model was asked, or the inputs its prompt is built from),
        ``answer``, ``gold`` and ``verdict`` (the score or the judge's verdict). Values: text, numbers, JSON-able
        lists/dicts, or None. ``assets``: the benchmark's assets where the caller has them, else None (``llmrec
        report`` reads only the run directory). Default: the sample's own ``prompt`` / ``gold`` / ``verdict``
        (else ``correct``) fields, and as answer its ``answer`` / ``output`` field, else the text of its last
        stage's output."""
        answer = row.get("answer", row.get("output"))
        if answer is None:
            answer = last_output(row)
        return {"prompt": row.get("prompt"), "answer": answer, "gold": row.get("gold"),
                "verdict": row.get("verdict", row.get("correct"))}


class PairedOutcomes:
    """What ``llmrec compare`` pairs across runs. ``cluster_key`` / ``cluster(row)``: the resampling unit of its
    paired tests (a declared field whose value is a row's cluster, e.g. its user; or a method for a unit made of
    several fields; default: each sample alone); ``paired_outcomes(cfg, rows, assets)``: see the method."""

    cluster_key: str | None = None

    def cluster(self, row: Sample) -> str:
        """The resampling unit of a stored row (units of one cluster are resampled / swapped together): its
        ``cluster_key`` field, else the sample itself."""
        key = cluster_key(self)  # type: ignore[arg-type]
        return str(row[key] if key is not None else row["sample_id"])

    def paired_outcomes(self, cfg: BenchmarkConfig, rows: list[Sample], assets: dict | None) -> list[Outcome]:
        """Per-unit values of the headline metrics (one ``Outcome`` per unit, setting and metric). Default: every
        headline metric that is also a per-sample field ``score`` wrote (its mean over answered samples is the
        metric), clustered by ``cluster``. Override it to map a metric to its field (``outcomes_from_fields``) or
        to give per-group units for metrics computed per group. Metrics with no outcome (counts such as
        ``failed``, set-level metrics such as a coverage) are not compared."""
        return outcomes_from_fields(self, rows, {m: m for m in headline_metrics(self)})  # type: ignore[arg-type]


class TargetsItems:
    """Rows each about one catalogue item (Beyond Utility's held-out target, an LRWorld probe's item): what the
    results verbs split a headline metric by, whether the subject memorized that item (its memorization probe run
    on the same catalogue, ``ProbesMemory``). ``target_item(cfg, row)``: ``(catalogue, how, value)`` of the item
    ``row`` is about: the catalogue as ``DataSpec.catalogue`` names the data it was read from, and the item by its
    ID in the catalogue's file (``how`` "id") or by its title as the file writes it ("title"); ``config``: the run's
    validated benchmark config. Default: None (about no item)."""

    def target_item(self, cfg: BenchmarkConfig, row: Sample) -> tuple[str, str, str] | None:
        return None


class ProbesMemory:
    """A memorization probe: which items of a catalogue the subject reproduced. ``probed_catalogue(cfg)``: the
    catalogue its run probed (``DataSpec.catalogue`` naming; None where the run probed no items);
    ``memorized_items(rows)``: ``(how, value)`` → memorized over the run's answered item rows, each item under its ID
    (``("id", "143")``) and its title (``("title", "Sound of Music, The (1965)")``). Default: none probed."""

    def probed_catalogue(self, cfg: BenchmarkConfig) -> str | None:
        return None

    def memorized_items(self, rows: list[Sample]) -> dict[tuple[str, str], bool]:
        return {}


# --- what each capability's members must be (checked at registration) ---------------------------------------

@dataclass(frozen=True)
class Member:
    """One member of a capability: a method or hook called with ``arity`` positional arguments (``nullable``:
    None means "none", e.g. no predictions file), or an attribute that must be ``want`` (checked by ``ok``)."""

    name: str
    arity: int | None = None
    nullable: bool = False
    want: str = ""
    ok: Callable[[Any], bool] | None = None


def _str_tuple(v: Any) -> bool:
    return isinstance(v, tuple) and all(isinstance(x, str) for x in v)


def _strs(name: str) -> Member:
    return Member(name, want="a tuple of str", ok=_str_tuple)


CAPABILITIES: dict[type, tuple[Member, ...]] = {
    HasTransient: (_strs("transient"),),
    HasData: (Member("data", want="a DataManifest or None", ok=lambda v: v is None or isinstance(v, DataManifest)),),
    HasCli: (),
    HasAssets: (Member("assets", 2),),
    Aggregates: (_strs("group_keys"), Member("aggregate", 3)),
    HasScoreTasks: (Member("score_tasks", want="a tuple of ScoreTask",
                           ok=lambda v: isinstance(v, tuple) and all(isinstance(t, ScoreTask) for t in v)),
                    Member("predictions", 2, nullable=True)),
    Presents: (_strs("headline_metrics"), _strs("protocol_keys"), Member("plots", 4), Member("entry_label", 1),
               Member("absent_text", want="a str or None", ok=lambda v: v is None or isinstance(v, str))),
    Judged: (_strs("judge_stages"), _strs("judged_metrics"),
             Member("adverse_labels", want="a dict", ok=lambda v: isinstance(v, dict)),
             Member("jury_fields", 4, nullable=True), Member("judge_decisions", 2), Member("judge_failures", 2)),
    HasBaselines: (Member("baselines", 3, nullable=True), Member("ranking_baselines", 3, nullable=True)),
    Explains: (Member("explain", 1), Member("drilldown", 2)),
    PairedOutcomes: (Member("cluster_key", want="a str or None", ok=lambda v: v is None or isinstance(v, str)),
                     Member("cluster", 1), Member("paired_outcomes", 3)),
    TargetsItems: (Member("target_item", 2),),
    ProbesMemory: (Member("probed_catalogue", 1), Member("memorized_items", 1)),
}
"""Every capability and its members, in the order ``check_benchmark`` reports them."""


def capability_of(member: str) -> type | None:
    """The capability a member name belongs to (None: not a capability's)."""
    return next((cap for cap, members in CAPABILITIES.items() if any(m.name == member for m in members)), None)


# --- accessors: a member of the benchmark when it declares the capability, else the capability's default -----

def _member(bench: Benchmark, cap: type, name: str) -> Any:
    if isinstance(bench, cap):
        return getattr(bench, name)
    default = cap.__dict__[name]
    return types.MethodType(default, bench) if isinstance(default, types.FunctionType) else default


def transient(bench: Benchmark) -> tuple[str, ...]:
    return _member(bench, HasTransient, "transient")


def data(bench: Benchmark) -> DataManifest | None:
    return _member(bench, HasData, "data")


def cli(bench: Benchmark) -> Any:
    return _member(bench, HasCli, "cli")


def assets(bench: Benchmark, cfg: BenchmarkConfig, data_dir: Path) -> dict | None:
    return _member(bench, HasAssets, "assets")(cfg, data_dir)


def group_keys(bench: Benchmark) -> tuple[str, ...]:
    return _member(bench, Aggregates, "group_keys")


def aggregate(bench: Benchmark, cfg: BenchmarkConfig, rows: list[Sample], assets: dict | None) -> dict[str, float]:
    return _member(bench, Aggregates, "aggregate")(cfg, rows, assets)


def score_tasks(bench: Benchmark) -> tuple[ScoreTask, ...]:
    return _member(bench, HasScoreTasks, "score_tasks")


def predictions(bench: Benchmark) -> Callable[[list[Sample], dict | None], list[dict]] | None:
    """The hook (None: the benchmark writes no predictions file)."""
    return _member(bench, HasScoreTasks, "predictions")


def headline_metrics(bench: Benchmark) -> tuple[str, ...]:
    return _member(bench, Presents, "headline_metrics")


def protocol_keys(bench: Benchmark) -> tuple[str, ...]:
    return _member(bench, Presents, "protocol_keys")


def absent_text(bench: Benchmark) -> str | None:
    return _member(bench, Presents, "absent_text")


def plots(bench: Benchmark, cfg: BenchmarkConfig, rows: list[Sample], out_dir: Path,
          assets: dict | None) -> list[Path]:
    return _member(bench, Presents, "plots")(cfg, rows, out_dir, assets)


def entry_label(bench: Benchmark, config: dict) -> str:
    return _member(bench, Presents, "entry_label")(config)


def judge_stages(bench: Benchmark) -> tuple[str, ...]:
    return _member(bench, Judged, "judge_stages")


def judged_metrics(bench: Benchmark) -> tuple[str, ...]:
    return _member(bench, Judged, "judged_metrics")


def adverse_labels(bench: Benchmark) -> dict[str, Any]:
    return _member(bench, Judged, "adverse_labels")


def jury_fields(bench: Benchmark) -> Callable[..., dict] | None:
    """The hook (None: the benchmark forms no jury)."""
    return _member(bench, Judged, "jury_fields")


def judge_decisions(bench: Benchmark, cfg: BenchmarkConfig, row: Sample) -> list[JudgeDecision]:
    return _member(bench, Judged, "judge_decisions")(cfg, row)


def judge_failures(bench: Benchmark, cfg: BenchmarkConfig, row: Sample) -> tuple[int, int]:
    return _member(bench, Judged, "judge_failures")(cfg, row)


def baselines(bench: Benchmark) -> Callable[..., dict[str, list[Sample]]] | None:
    """The hook (None: no model-free baselines)."""
    return _member(bench, HasBaselines, "baselines")


def ranking_baselines(bench: Benchmark) -> Callable[..., RankingBaselines | None] | None:
    """The hook (None: the benchmark ranks no candidates)."""
    return _member(bench, HasBaselines, "ranking_baselines")


def explain(bench: Benchmark, row: Sample) -> Explanation | None:
    return _member(bench, Explains, "explain")(row)


def drilldown(bench: Benchmark, row: Sample, assets: dict | None) -> dict[str, Any]:
    return _member(bench, Explains, "drilldown")(row, assets)


def cluster_key(bench: Benchmark) -> str | None:
    return _member(bench, PairedOutcomes, "cluster_key")


def cluster(bench: Benchmark, row: Sample) -> str:
    return _member(bench, PairedOutcomes, "cluster")(row)


def paired_outcomes(bench: Benchmark, cfg: BenchmarkConfig, rows: list[Sample], assets: dict | None) -> list[Outcome]:
    return _member(bench, PairedOutcomes, "paired_outcomes")(cfg, rows, assets)


# --- helpers that read capabilities -------------------------------------------------------------------------

def target_item(bench: Benchmark, cfg: BenchmarkConfig, row: Sample) -> tuple[str, str, str] | None:
    return _member(bench, TargetsItems, "target_item")(cfg, row)


def probed_catalogue(bench: Benchmark, cfg: BenchmarkConfig) -> str | None:
    return _member(bench, ProbesMemory, "probed_catalogue")(cfg)


def memorized_items(bench: Benchmark, rows: list[Sample]) -> dict[tuple[str, str], bool]:
    return _member(bench, ProbesMemory, "memorized_items")(rows)


def setting_label(keys: Iterable[str], row: dict) -> str:
    """``k1=v1,k2=v2`` over ``keys`` (the name of a setting's MLflow child run, after the run name)."""
    return ",".join(f"{k}={row.get(k)}" for k in keys)


def setting_of(bench: Benchmark, row: dict) -> str:
    """The label of a stored sample's setting: its record's ``setting`` mapping (rows stored before the record had
    one: the benchmark's ``group_keys`` read from the row)."""
    keys = group_keys(bench)
    setting = row.get("setting")
    if not isinstance(setting, dict):
        return setting_label(keys, row)
    ordered = [k for k in keys if k in setting] + [k for k in setting if k not in keys]
    return setting_label(ordered, setting)  # in group_keys order (a stored mapping may come back key-sorted)


def outcomes_from_fields(bench: Benchmark, rows: list[Sample], fields: dict[str, str],
                         cluster: Callable[[Sample], Any] | None = None,
                         statistic: Literal["mean", "median"] = "mean") -> list[Outcome]:
    """Outcomes read from per-sample fields that ``score`` wrote: ``fields`` maps a headline metric to
    the field whose mean over answered samples (status ok) the metric is, e.g. ``{"accuracy": "correct"}``.
    A missing, None or non-finite field gives no outcome for that sample (e.g. an unparsable answer a
    metric leaves out). ``cluster(row)``: the resampling unit (default: the benchmark's ``cluster`` hook)."""
    unit = cluster or _member(bench, PairedOutcomes, "cluster")
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
                out.append(Outcome(str(r["sample_id"]), setting_of(bench, r), str(unit(r)), metric, v, statistic))
    return out
