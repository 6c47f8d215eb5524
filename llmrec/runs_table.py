"""`llmrec runs`: MLflow runs side by side.

Columns are the headline metrics each run declares (its ``llmrec.headline`` tag: a
benchmark's ``headline_metrics``, the trainer's test metrics), so evaluation runs and
baseline runs of one experiment share a table; ``--metric`` picks columns by hand.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from llmrec import tracking
from llmrec.errors import LlmrecError

SUMMARY_PARAMS = ("engine.type", "engine.model", "engine.model_path", "model.name", "benchmark.forms",
                  "benchmark.turns", "benchmark.methods", "benchmark.topics")


def headline_columns(runs) -> list[str]:
    """The union of the runs' declared headline metrics, in first-seen order, that some run has."""
    cols: list[str] = []
    for r in runs:
        for m in filter(None, (r.data.tags.get(tracking.TAG_HEADLINE) or "").split(",")):
            if m not in cols and any(m in x.data.metrics for x in runs):
                cols.append(m)
    return cols


def run_label(run, setting: str | None) -> str:
    """The run's name without a trailing `` · <setting>`` (a child run's name ends with the setting its own
    column shows), else its id's start."""
    name = run.info.run_name or run.info.run_id[:8]
    return name.removesuffix(f" · {setting}") if setting else name


def runs_table(uri: str | None, experiment: str | None, metrics: list[str], limit: int) -> Table:
    client = tracking.client(tracking.existing_store(uri))
    exps = client.search_experiments()
    if experiment:
        exps = [e for e in exps if e.name == experiment]
        if not exps:
            names = ", ".join(e.name for e in client.search_experiments())
            raise LlmrecError(f"no experiment named '{experiment}'. Available: {names or '(none)'}")
    runs = client.search_runs([e.experiment_id for e in exps], max_results=limit, order_by=["attributes.start_time DESC"])
    names = {e.experiment_id: e.name for e in exps}
    cols = [tracking.metric_key(m) for m in metrics] or headline_columns(runs)
    table = Table(title=f"MLflow runs ({tracking.tracking_uri(uri)})")
    table.add_column("experiment", no_wrap=True)
    table.add_column("run", overflow="fold", min_width=24)  # long child names fold; short names stay whole
    table.add_column("kind", no_wrap=True)
    for c in ("setting / config",) + tuple(cols):
        table.add_column(c, overflow="fold")
    for r in runs:
        tagged = r.data.tags.get(tracking.TAG_SETTING)
        setting = tagged or "; ".join(
            f"{k.split('.', 1)[1]}={r.data.params[k]}" for k in SUMMARY_PARAMS if k in r.data.params)
        table.add_row(escape(names.get(r.info.experiment_id, "?")), escape(run_label(r, tagged)),
                      escape(r.data.tags.get(tracking.TAG_KIND, "")), escape(setting),
                      *[f"{r.data.metrics[c]:.4f}" if c in r.data.metrics else "" for c in cols])
    return table
