"""`llmrec runs`: MLflow runs, one line each.

By default a run is one line: run, benchmark, subject, its headline metric with the 95% CI, its cost per 1,000 samples
(``llmrec.costs``: USD where the run had a price table, else tokens; ``—`` without a cost ledger), n (samples) and
failed samples. The headline metric is the first a run declares (its ``llmrec.headline`` tag: a benchmark's
``headline_metrics``, the trainer's test metrics); ``--metric`` picks the metrics by hand (an unknown one is refused
naming the metrics the runs have, as ``llmrec leaderboard`` refuses it). ``--wide`` adds experiment, kind and the
setting or config summary, with every headline metric as a column; ``--csv`` writes every column, full precision.
"""

from __future__ import annotations

import csv
import io
import math

from rich.markup import escape
from rich.table import Table

from llmrec import costs, tracking
from llmrec.errors import ConfigError, LlmrecError

SUMMARY_PARAMS = ("engine.type", "engine.model", "engine.model_path", "model.name", "benchmark.forms",
                  "benchmark.turns", "benchmark.methods", "benchmark.topics")
N_KEYS = ("n_answered", "n_samples")  # a benchmark's own sample count, else the runner's samples_resumed + samples_new
CSV_COLUMNS = ("experiment", "run_id", "run", "kind", "benchmark", "subject", "setting", "n", "failed", "usd_per_1k",
               "tokens_per_1k")


def headline_columns(runs) -> list[str]:
    """The union of the runs' declared headline metrics, in first-seen order, that some run has."""
    cols: list[str] = []
    for r in runs:
        for m in _headline(r):
            if m not in cols and any(m in x.data.metrics for x in runs):
                cols.append(m)
    return cols


def _headline(run) -> list[str]:
    return [m for m in (run.data.tags.get(tracking.TAG_HEADLINE) or "").split(",") if m]


def run_label(run, setting: str | None) -> str:
    """The run's name without a trailing `` · <setting>`` (a child run's name ends with the setting its own
    column shows), else its id's start."""
    name = run.info.run_name or run.info.run_id[:8]
    return name.removesuffix(f" · {setting}") if setting else name


def _setting(run) -> str:
    tagged = run.data.tags.get(tracking.TAG_SETTING)
    return tagged or "; ".join(f"{k.split('.', 1)[1]}={run.data.params[k]}" for k in SUMMARY_PARAMS
                               if k in run.data.params)


def _subject(run) -> str:
    tags, params = run.data.tags, run.data.params
    return (tags.get(tracking.TAG_SUBJECT) or tags.get("model") or params.get("engine.model")
            or params.get("model.name") or "")


def _n(run) -> float:
    m = run.data.metrics
    for k in N_KEYS:
        if k in m:
            return m[k]
    if "samples_resumed" in m or "samples_new" in m:
        return m.get("samples_resumed", 0.0) + m.get("samples_new", 0.0)
    return math.nan


def _num(v: float) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.0f}"


def _value(run, metric: str) -> str:
    """``0.412 [0.301, 0.520]`` (the CI where the run logged one), a count whole; empty where the run has none."""
    m = run.data.metrics
    if metric not in m:
        return ""
    if tracking.is_count(metric):
        return f"{m[metric]:.0f}"
    from llmrec.small_samples import CI_CLUSTERS, few_mark

    lo, hi = m.get(f"{metric}_ci_low"), m.get(f"{metric}_ci_high")
    if lo is None or hi is None:
        return f"{m[metric]:.3f}"
    return f"{m[metric]:.3f} [{lo:.3f}, {hi:.3f}]" + few_mark(m.get(f"{metric}{CI_CLUSTERS}"))


def _search(uri: str | None, experiment: str | None, limit: int):
    store = tracking.existing_store(uri)
    try:
        return _runs(tracking.client(store), experiment, limit)
    except LlmrecError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever MLflow raises (its own, sqlalchemy's, requests') is one line
        from llmrec.redact import redact_text

        raise ConfigError(f"tracking store {redact_text(store)} cannot be read: "
                          f"{redact_text(' '.join(str(e).split()))[:300]} (check --tracking-uri or "
                          "$MLFLOW_TRACKING_URI)") from e


def _runs(client, experiment: str | None, limit: int):
    exps = client.search_experiments()
    if experiment:
        exps = [e for e in exps if e.name == experiment]
        if not exps:
            names = ", ".join(e.name for e in client.search_experiments())
            raise LlmrecError(f"no experiment named '{experiment}'. Available: {names or '(none)'}")
    runs = client.search_runs([e.experiment_id for e in exps], max_results=limit,
                              order_by=["attributes.start_time DESC"])
    return runs, {e.experiment_id: e.name for e in exps}


def _checked(runs, metrics: list[str]) -> list[str]:
    """``--metric`` as MLflow keys; one no run has is refused naming those the runs have."""
    cols = [tracking.metric_key(m) for m in metrics]
    have = {k for r in runs for k in r.data.metrics}
    unknown = [m for m, c in zip(metrics, cols) if c not in have]
    if unknown:
        names = sorted(k for k in have if not k.endswith(("_ci_low", "_ci_high")))
        shown = ", ".join(names[:30]) + (f", … ({len(names)} in all)" if len(names) > 30 else "")
        raise ConfigError(f"--metric {', '.join(unknown)}: no metric of that name in these runs "
                          f"(they have: {shown or 'none'})")
    return cols


def runs_table(uri: str | None, experiment: str | None, metrics: list[str], limit: int, wide: bool = False,
               width: int | None = None) -> Table:
    """The runs as a table: one line each, fitted to ``width`` (default: the terminal's) by cutting names;
    ``wide``: every column."""
    from llmrec.small_samples import MIN_CLUSTERS

    runs, names = _search(uri, experiment, limit)
    cols = _checked(runs, metrics) if metrics else []
    table = Table(title=f"MLflow runs ({tracking.tracking_uri(uri)})",
                  caption=f"value [95% CI] († from fewer than {MIN_CLUSTERS} clusters); {costs.COLUMN}: USD (else "
                          "tokens) per 1,000 samples; n: samples; failed: samples that failed" if not wide else None,
                  caption_justify="left")
    if wide:
        cols = cols or headline_columns(runs)
        table.add_column("experiment", no_wrap=True)
        table.add_column("run", overflow="fold", min_width=24)  # long child names fold; short names stay whole
        table.add_column("kind", no_wrap=True)
        for c in ("setting / config",) + tuple(cols) + (costs.COLUMN,):
            table.add_column(c, overflow="fold")
        for r in runs:
            tagged = r.data.tags.get(tracking.TAG_SETTING)
            table.add_row(escape(names.get(r.info.experiment_id, "?")), escape(run_label(r, tagged)),
                          escape(r.data.tags.get(tracking.TAG_KIND, "")), escape(_setting(r)),
                          *[f"{r.data.metrics[c]:.4f}" if c in r.data.metrics else "" for c in cols],
                          costs.per_1k_text(r.data.metrics))
        return table
    # one line a run: long names are cut (…) so the numbers always show whole; --wide / --csv hold everything
    rows = []
    for r in runs:
        shown = cols or _headline(r)[:1]
        value = "; ".join(v for v in (_value(r, m) for m in shown) if v)
        head = f"{shown[0]} {value}" if shown and value and not cols else value
        rows.append([escape(run_label(r, r.data.tags.get(tracking.TAG_SETTING))),
                     escape(r.data.tags.get("benchmark", "")), escape(_subject(r)), escape(head),
                     costs.per_1k_text(r.data.metrics), _num(_n(r)), _num(r.data.metrics.get("failed", math.nan))])
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
    table.add_column("run", no_wrap=True, overflow="ellipsis", width=run)
    table.add_column("benchmark", no_wrap=True, overflow="ellipsis", width=bench)
    table.add_column("subject", no_wrap=True, overflow="ellipsis", width=subject)
    table.add_column(head, no_wrap=True, min_width=widest[3])
    table.add_column(costs.COLUMN, justify="right", no_wrap=True, min_width=widest[4])
    table.add_column("n", justify="right", no_wrap=True, min_width=widest[5])
    table.add_column("failed", justify="right", no_wrap=True, min_width=widest[6])
    for row in rows:
        table.add_row(*row)
    return table


def runs_csv(uri: str | None, experiment: str | None, metrics: list[str], limit: int) -> str:
    """Every column of every run as CSV (full precision): ``CSV_COLUMNS``, then each metric shown (``--metric``,
    else every headline metric) with its CI bounds."""
    runs, names = _search(uri, experiment, limit)
    cols = _checked(runs, metrics) if metrics else headline_columns(runs)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*CSV_COLUMNS, *(f"{c}{s}" for c in cols for s in ("", "_ci_low", "_ci_high"))])
    for r in runs:
        m = r.data.metrics
        w.writerow([names.get(r.info.experiment_id, ""), r.info.run_id, r.info.run_name or "",
                    r.data.tags.get(tracking.TAG_KIND, ""), r.data.tags.get("benchmark", ""), _subject(r), _setting(r),
                    "" if math.isnan(_n(r)) else _n(r), m.get("failed", ""), m.get(costs.USD_PER_1K, ""),
                    m.get(costs.TOKENS_PER_1K, ""),
                    *(m.get(f"{c}{s}", "") for c in cols for s in ("", "_ci_low", "_ci_high"))])
    return buf.getvalue()
