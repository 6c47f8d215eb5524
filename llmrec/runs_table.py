"""`llmrec runs`: MLflow runs side by side."""

from __future__ import annotations

from rich.table import Table

from llmrec import tracking
from llmrec.errors import LlmrecError

MAIN_METRICS = ("accuracy", "missed_rate", "failed", "over_context", "ptc", "ig_f1_mean", "ndcg@10", "hr@10")
SUMMARY_PARAMS = ("engine.type", "engine.model", "engine.model_path", "benchmark.forms", "benchmark.turns",
                  "benchmark.methods", "benchmark.topics")


def runs_table(uri: str | None, experiment: str | None, metrics: list[str], limit: int) -> Table:
    import mlflow

    mlflow.set_tracking_uri(tracking.tracking_uri(uri))
    client = mlflow.MlflowClient()
    exps = client.search_experiments()
    if experiment:
        exps = [e for e in exps if e.name == experiment]
        if not exps:
            names = ", ".join(e.name for e in client.search_experiments())
            raise LlmrecError(f"no experiment named '{experiment}'. Available: {names or '(none)'}")
    runs = client.search_runs([e.experiment_id for e in exps], max_results=limit, order_by=["attributes.start_time DESC"])
    names = {e.experiment_id: e.name for e in exps}
    cols = list(metrics) or [m for m in MAIN_METRICS if any(m in r.data.metrics for r in runs)]
    table = Table(title=f"MLflow runs ({tracking.tracking_uri(uri)})")
    for c in ("experiment", "run", "setting / config") + tuple(cols):
        table.add_column(c, overflow="fold")
    for r in runs:
        setting = r.data.tags.get("llmrec.setting") or "; ".join(
            f"{k.split('.', 1)[1]}={r.data.params[k]}" for k in SUMMARY_PARAMS if k in r.data.params)
        table.add_row(names.get(r.info.experiment_id, "?"), r.info.run_name or r.info.run_id[:8], setting,
                      *[f"{r.data.metrics[c]:.4f}" if c in r.data.metrics else "" for c in cols])
    return table
