"""`llmrec runs`: one line per run, from the MLflow index or from run and suite directories.

A run is one :class:`RunLine` whichever source it comes from: :meth:`RunLine.of_mlflow` reads an MLflow run (its
tags, params and metrics), :meth:`RunLine.of_stored` a :class:`~llmrec.pipelines.results.stored.StoredRun` (its
metrics file, config and installed benchmark), so a run listed from its directory shows what its MLflow run shows.
``llmrec runs`` without sources lists the tracking store's runs (most recent first); ``llmrec runs DIR…`` lists run
directories, suite directories (one line per entry), folders holding them, and ``s3://`` URIs, read
through ``open_runs`` (the directories are the source of truth; nothing is asked of MLflow).

By default a run is one line: run, benchmark, subject, its headline metric with the 95% CI, its cost per 1,000
samples (``llmrec.costs``: USD where the run had a price table, else tokens; ``—`` without a cost ledger), n
(samples) and failed samples. The headline metric is the first a run declares (an MLflow run's ``llmrec.headline``
tag: a benchmark's ``headline_metrics``, the trainer's test metrics; a directory's: its suite index's, else its
installed benchmark's); ``--metric`` picks the metrics by hand (an unknown one is refused naming the metrics the runs
have, as ``llmrec leaderboard`` refuses it). ``--wide`` adds experiment, kind and the setting or config summary,
with every headline metric as a column; ``--csv`` writes every column, full precision.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from rich.markup import escape
from rich.table import Table

from llmrec import costs, tracking
from llmrec.errors import ConfigError, LlmrecError
from llmrec.small_samples import CI_CLUSTERS, MIN_CLUSTERS, few_mark

if TYPE_CHECKING:
    from llmrec.pipelines.results.stored import StoredRun

SUMMARY_PARAMS = ("engine.type", "engine.model", "engine.model_path", "model.name", "benchmark.forms",
                  "benchmark.turns", "benchmark.methods", "benchmark.topics")
N_KEYS = ("n_answered", "n_samples")  # a benchmark's own sample count, else the runner's samples_resumed + samples_new
CSV_COLUMNS = ("experiment", "run_id", "run", "kind", "benchmark", "subject", "setting", "n", "failed", "usd_per_1k",
               "tokens_per_1k", "run_dir")
CI = ("", "_ci_low", "_ci_high")


@dataclass(frozen=True)
class Value:
    """One metric of one run: its value, the 95% CI where the run has one, and the clusters the CI rests on."""

    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    clusters: float | None = None

    def text(self, count: bool = False) -> str:
        """``0.412 [0.301, 0.520]`` (``†`` after a CI from few clusters); ``0.412`` without a CI; a count whole."""
        if count:
            return f"{self.value:.0f}"
        if self.ci_low is None or self.ci_high is None:
            return f"{self.value:.3f}"
        return f"{self.value:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]" + few_mark(self.clusters)


def metric_value(metrics: Mapping[str, float], metric: str) -> Value | None:
    """``metric`` of a run's metrics (MLflow keys) with its CI bounds and cluster count; None where it has none."""
    if metric not in metrics:
        return None
    return Value(metrics[metric], metrics.get(f"{metric}_ci_low"), metrics.get(f"{metric}_ci_high"),
                 metrics.get(f"{metric}{CI_CLUSTERS}"))


def value_text(metrics: Mapping[str, float], metric: str) -> str:
    """A table cell: ``0.412 [0.301, 0.520]`` (the CI where the run has one), a count whole; empty without it."""
    v = metric_value(metrics, metric)
    return "" if v is None else v.text(tracking.is_count(metric))


def _nan(v) -> float:
    return math.nan if v is None else float(v)


@dataclass(frozen=True)
class RunLine:
    """What ``llmrec runs`` shows of one run, from MLflow or from its directory.

    ``run``: its recorded name (the MLflow run's; a directory's name, ``<subject>/<entry>`` for a suite's entry);
    ``label``: what the table calls it (the name without the setting its own column shows). ``metrics``: every finite
    metric under MLflow keys (``tracking.metric_key``), for ``--metric``, ``--wide`` and ``--csv``. ``n`` and
    ``failed``: NaN where the run does not say."""

    experiment: str
    run_id: str  # the MLflow run id ("" for a directory never logged to MLflow)
    run: str
    label: str
    kind: str
    benchmark: str
    subject: str
    setting: str
    run_dir: str  # the run directory (MLflow: the location it was logged from, where recorded)
    headline: tuple[str, ...]  # the declared headline metrics, MLflow keys
    metrics: Mapping[str, float] = field(repr=False)
    n: float = math.nan
    failed: float = math.nan

    def value(self, metric: str) -> Value | None:
        return metric_value(self.metrics, metric)

    @property
    def usd_per_1k(self) -> float | None:
        return self.metrics.get(costs.USD_PER_1K)

    @property
    def tokens_per_1k(self) -> float | None:
        return self.metrics.get(costs.TOKENS_PER_1K)

    @property
    def cost_text(self) -> str:
        return costs.per_1k_text(self.metrics)

    # ---- the two sources ------------------------------------------------------------------------------------
    @classmethod
    def of_mlflow(cls, run, experiment: str) -> "RunLine":
        """An MLflow run (as ``MlflowClient.search_runs`` returns it) of the experiment named ``experiment``."""
        tags, params, m = run.data.tags, run.data.params, dict(run.data.metrics)
        tagged = tags.get(tracking.TAG_SETTING)
        name = run.info.run_name or ""
        label = name or run.info.run_id[:8]
        n = math.nan
        for k in N_KEYS:
            if k in m:
                n = m[k]
                break
        else:
            if "samples_resumed" in m or "samples_new" in m:
                n = m.get("samples_resumed", 0.0) + m.get("samples_new", 0.0)
        return cls(
            experiment=experiment, run_id=run.info.run_id, run=name,
            label=label.removesuffix(f" · {tagged}") if tagged else label,  # a child's name ends with its setting
            kind=tags.get(tracking.TAG_KIND, ""), benchmark=tags.get("benchmark", ""),
            subject=(tags.get(tracking.TAG_SUBJECT) or tags.get("model") or params.get("engine.model")
                     or params.get("model.name") or ""),
            setting=tagged or _summary(params),
            run_dir=tags.get(tracking.TAG_RUN_LOCATION) or tags.get(tracking.TAG_RUN_DIR, ""),
            headline=tuple(h for h in (tags.get(tracking.TAG_HEADLINE) or "").split(",") if h),
            metrics=m, n=n, failed=_nan(m.get("failed")))

    @classmethod
    def of_stored(cls, run: "StoredRun") -> "RunLine":
        """A run directory (or a suite's entry) as ``open_runs`` opened it: its metrics file, config and installed
        benchmark; the line its MLflow run shows, but for the name (the directory's) and the MLflow-only
        bookkeeping (``samples_resumed`` / ``samples_new``, times)."""
        from llmrec.pipelines.runner import judge_failures

        m = tracking.finite_metrics(run.metrics)
        cfg = run.config
        section = cfg.get("tracking")
        experiment = (section.get("experiment") if isinstance(section, dict) else None) or run.suite or (
            run.benchmark if run.benchmark != "?" else "")
        headline = tuple(run.headline) + judge_failures.pinned(run.judged)
        n = next((m[k] for k in (*N_KEYS, f"{costs.PREFIX}samples") if k in m), math.nan)
        if math.isnan(n) and run.has_samples():
            n = float(len(run.samples(columns=["sample_id"]) or []))
        kind = "baseline" if run.kind == "baseline" else "run" if "engine" in cfg else "train" if "model" in cfg else ""
        return cls(
            experiment=str(experiment), run_id=run.mlflow_run_id or "", run=run.name, label=run.name, kind=kind,
            benchmark=run.benchmark if run.benchmark != "?" else "", subject=run.subject,
            setting=_summary(tracking.safe_params(cfg)), run_dir=str(run.dir.uri),
            headline=tuple(dict.fromkeys(tracking.metric_key(h) for h in headline)), metrics=m, n=n,
            failed=_nan(m.get("failed")))


def _summary(params: Mapping[str, str]) -> str:
    """The config summary a run without a setting shows: engine, model and the benchmark's main choices."""
    return "; ".join(f"{k.split('.', 1)[1]}={params[k]}" for k in SUMMARY_PARAMS if k in params)


# ---- where the lines come from ----------------------------------------------------------------------------------

def mlflow_lines(uri: str | None, experiment: str | None, limit: int) -> list[RunLine]:
    """The tracking store's most recent ``limit`` runs (of ``experiment``, else of every experiment)."""
    store = tracking.existing_store(uri)
    try:
        runs, names = _search(tracking.client(store), experiment, limit)
    except LlmrecError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever MLflow raises (its own, sqlalchemy's, requests') is one line
        from llmrec.redact import redact_text

        raise ConfigError(f"tracking store {redact_text(store)} cannot be read: "
                          f"{redact_text(' '.join(str(e).split()))[:300]} (check --tracking-uri or "
                          "$MLFLOW_TRACKING_URI)") from e
    return [RunLine.of_mlflow(r, names.get(r.info.experiment_id, "")) for r in runs]


def _search(client, experiment: str | None, limit: int):
    exps = client.search_experiments()
    if experiment:
        exps = [e for e in exps if e.name == experiment]
        if not exps:
            names = ", ".join(e.name for e in client.search_experiments())
            raise LlmrecError(f"no experiment named '{experiment}'. Available: {names or '(none)'}")
    runs = client.search_runs([e.experiment_id for e in exps], max_results=limit,
                              order_by=["attributes.start_time DESC"])
    return runs, {e.experiment_id: e.name for e in exps}


def stored_lines(sources: Iterable[str]) -> list[RunLine]:
    """One line per run of the given run directories, suite directories (each entry), folders holding them and
    storage URIs, in order; ``RunNotReadable`` naming the first that cannot be read."""
    from llmrec.pipelines.results.stored import open_runs

    return [RunLine.of_stored(r) for r in open_runs(sources, folders=True)]


# ---- the one renderer -----------------------------------------------------------------------------------------

def headline_columns(lines: list[RunLine]) -> list[str]:
    """The union of the runs' declared headline metrics, in first-seen order, that some run has."""
    cols: list[str] = []
    for line in lines:
        for m in line.headline:
            if m not in cols and any(m in x.metrics for x in lines):
                cols.append(m)
    return cols


def checked(lines: list[RunLine], metrics: list[str]) -> list[str]:
    """``--metric`` as MLflow keys; one no run has is refused naming those the runs have."""
    cols = [tracking.metric_key(m) for m in metrics]
    have = {k for line in lines for k in line.metrics}
    unknown = [m for m, c in zip(metrics, cols) if c not in have]
    if unknown:
        names = sorted(k for k in have if not k.endswith(("_ci_low", "_ci_high")))
        shown = ", ".join(names[:30]) + (f", … ({len(names)} in all)" if len(names) > 30 else "")
        raise ConfigError(f"--metric {', '.join(unknown)}: no metric of that name in these runs "
                          f"(they have: {shown or 'none'})")
    return cols


def _num(v: float) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.0f}"


def table(lines: list[RunLine], metrics: list[str], title: str, wide: bool = False, width: int | None = None) -> Table:
    """The runs as a table: one line each, fitted to ``width`` (default: the terminal's) by cutting names;
    ``wide``: every column."""
    cols = checked(lines, metrics) if metrics else []
    out = Table(title=title,
                caption=f"value [95% CI] († from fewer than {MIN_CLUSTERS} clusters); {costs.COLUMN}: USD (else "
                        "tokens) per 1,000 samples; n: samples; failed: samples that failed" if not wide else None,
                caption_justify="left")
    if wide:
        cols = cols or headline_columns(lines)
        out.add_column("experiment", no_wrap=True)
        out.add_column("run", overflow="fold", min_width=24)  # long child names fold; short names stay whole
        out.add_column("kind", no_wrap=True)
        for c in ("setting / config",) + tuple(cols) + (costs.COLUMN,):
            out.add_column(c, overflow="fold")
        for line in lines:
            out.add_row(escape(line.experiment or "?"), escape(line.label), escape(line.kind), escape(line.setting),
                        *[f"{line.metrics[c]:.4f}" if c in line.metrics else "" for c in cols], line.cost_text)
        return out
    # one line a run: long names are cut (…) so the numbers always show whole; --wide / --csv hold everything
    rows = []
    for line in lines:
        shown = cols or list(line.headline[:1])
        value = "; ".join(v for v in (value_text(line.metrics, m) for m in shown) if v)
        head = f"{shown[0]} {value}" if shown and value and not cols else value
        rows.append([escape(line.label), escape(line.benchmark), escape(line.subject), escape(head), line.cost_text,
                     _num(line.n), _num(line.failed)])
    if width is None:
        from rich.console import Console

        width = Console().width
    head = " · ".join(metrics) if metrics else "headline [95% CI]"
    widest = [max([len(x[i]) for x in rows] + [len(h)]) for i, h in
              enumerate(("run", "benchmark", "subject", head, costs.COLUMN, "n", "failed"))]
    bench, subject = min(widest[1], 16), min(widest[2], 24)
    room = width - 22 - sum(widest[3:])  # 22: the borders and padding of seven columns
    run = max(12, min(widest[0], room - bench - subject))
    subject = max(7, min(subject, room - bench - run))
    out.add_column("run", no_wrap=True, overflow="ellipsis", width=run)
    out.add_column("benchmark", no_wrap=True, overflow="ellipsis", width=bench)
    out.add_column("subject", no_wrap=True, overflow="ellipsis", width=subject)
    out.add_column(head, no_wrap=True, min_width=widest[3])
    out.add_column(costs.COLUMN, justify="right", no_wrap=True, min_width=widest[4])
    out.add_column("n", justify="right", no_wrap=True, min_width=widest[5])
    out.add_column("failed", justify="right", no_wrap=True, min_width=widest[6])
    for row in rows:
        out.add_row(*row)
    return out


def csv_text(lines: list[RunLine], metrics: list[str]) -> str:
    """Every column of every run as CSV (full precision): ``CSV_COLUMNS``, then each metric shown (``--metric``,
    else every headline metric) with its CI bounds."""
    cols = checked(lines, metrics) if metrics else headline_columns(lines)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*CSV_COLUMNS, *(f"{c}{s}" for c in cols for s in CI)])
    for line in lines:
        m = line.metrics
        w.writerow([line.experiment, line.run_id, line.run, line.kind, line.benchmark, line.subject, line.setting,
                    "" if math.isnan(line.n) else line.n, "" if math.isnan(line.failed) else line.failed,
                    m.get(costs.USD_PER_1K, ""), m.get(costs.TOKENS_PER_1K, ""), line.run_dir,
                    *(m.get(f"{c}{s}", "") for c in cols for s in CI)])
    return buf.getvalue()


def mlflow_title(uri: str | None) -> str:
    return f"MLflow runs ({tracking.tracking_uri(uri)})"


def sources_title(sources: Iterable[str]) -> str:
    return f"Runs in {', '.join(map(str, sources))}"


# ---- the MLflow index, as `llmrec runs` without sources shows it ---------------------------------------------------

def runs_table(uri: str | None, experiment: str | None, metrics: list[str], limit: int, wide: bool = False,
               width: int | None = None) -> Table:
    """The tracking store's runs as a table (see :func:`table`)."""
    return table(mlflow_lines(uri, experiment, limit), metrics, mlflow_title(uri), wide, width)


def runs_csv(uri: str | None, experiment: str | None, metrics: list[str], limit: int) -> str:
    """The tracking store's runs as CSV (see :func:`csv_text`)."""
    return csv_text(mlflow_lines(uri, experiment, limit), metrics)
