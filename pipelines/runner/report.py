"""After a run: metrics, per-sample files, plots, and the MLflow record."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from llmrec import tracking
from llmrec.pipelines import capabilities as caps
from llmrec.storage import storage_errors
from llmrec.config import dump_yaml, fingerprint
from llmrec.pipelines.protocol import protocol_record, record_schema, setting_label
from llmrec.redact import redact_text
from llmrec.pipelines.runner.execution import RunPlan
from llmrec.pipelines.runner import judge_failures
from llmrec.pipelines.runner.judges import judge_protocol
from llmrec.pipelines.runner.provenance_record import mlflow_tags, run_provenance
from llmrec.rundir import RunDir, RunWriter

log = logging.getLogger(__name__)


def staging_dir(p: RunPlan) -> RunWriter:
    """The run's writer (``RunWriter``): files are made in its working folder — the run directory itself when it is
    local, else a temporary folder whose files :meth:`RunWriter.publish_all` uploads, the metrics last."""
    return RunWriter(p.run_dir)


def write_outputs(p: RunPlan, rows: list[dict], metrics: dict, writer: RunWriter) -> dict[str, Path]:
    """The run's files in the writer's working folder: samples, facts, predictions, and the config when the run
    directory is remote. The metrics come last, from :func:`complete` (a run directory with its metrics is
    complete), which also publishes them all. File names are ``RunDir``'s."""
    publish = False  # complete() publishes them, the metrics last
    if not p.run_dir.local:
        writer.write_config(dump_yaml(p.config), publish)
    samples = writer.file(RunDir.SAMPLES)  # one typed column per declared field; nested ones as JSON text
    with storage_errors(str(samples), "write"):  # a full disk: one line naming the file
        pq.write_table(samples_table(p, rows), samples, compression="zstd")  # see ResultStore.write
    files = {"samples": samples, "config": writer.file(RunDir.CONFIG)}
    if p.facts:
        files["facts"] = writer.write_facts(p.facts, publish)
    files["provenance"] = writer.write_provenance(run_provenance(p, rows), publish)  # what produced the outputs
    write_lines = caps.predictions(p.bench)
    if write_lines is not None:
        files["predictions"] = writer.file(RunDir.PREDICTIONS)
        with storage_errors(str(files["predictions"]), "write"), open(files["predictions"], "w") as fh:
            for line in write_lines(rows, p.assets):
                fh.write(json.dumps(line) + "\n")
    return files


def complete(writer: RunWriter, files: dict[str, Path], metrics: dict) -> None:
    """Write the metrics (the file that marks the run complete) after every other file of the run, then publish
    the working folder to a remote run directory, the metrics last."""
    files["metrics"] = writer.write_metrics(metrics, publish=False)
    writer.publish_all(last=RunDir.METRICS)


def samples_table(p: RunPlan, rows: list[dict]):
    """``samples.parquet``'s table of ``rows`` (``collect``'s): the result store's typed shards compacted, or, when
    some shard is not typed (written by an older llmrec) or of another declaration, built from the rows."""
    schema = record_schema(p.bench)
    table = p.store.compacted([str(r["sample_id"]) for r in rows]) if p.store is not None else None  # a baseline: none
    if table is None or table.num_rows != len(rows) or not table.schema.equals(schema.arrow_schema(), True):
        return schema.table(rows)
    schema.warn_undeclared(rows)
    return table


def data_fingerprint(p: RunPlan) -> str:
    return fingerprint([[s["sample_id"] for s in p.samples]], 16)


def group_rows(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        out[tuple(r.get(k) for k in keys)].append(r)
    return dict(out)


def run_title(p: RunPlan) -> str:
    """The start of a single run's MLflow name: ``<benchmark> · <model>`` (then what differs from the experiment's
    other runs of them: :func:`names_by_difference`; the config hash is the tag ``llmrec.config_hash``)."""
    return f"{p.bench.name} · {tracking.model_label(p.config.engine)}"


NAME_MAX = 240  # characters of an MLflow run name


def _result_params(params: dict[str, str]) -> dict[str, str]:
    """A run's logged params (flattened config) that tell its results apart (``run_config.result_sections``)."""
    from llmrec.pipelines.runner.run_config import result_sections

    return result_sections(params)


def names_by_difference(client, exp_id: str, p: RunPlan, run_id: str | None, base: str) -> tuple[str, dict[str, str]]:
    """The run's MLflow name: ``base`` (``<benchmark> · <model>``) followed by the config keys whose values differ
    between it and the experiment's other single runs of the same benchmark and model (``prefeval · llamacpp
    n_ctx=4096``), compared on their logged params (``_result_params``). Also run id → new name for those other
    runs whose name (still ``base``-led) no longer tells them apart from this one."""
    label = tracking.model_label(p.config.engine)
    others = [r for r in client.search_runs(
        [exp_id], filter_string=f"tags.`{tracking.TAG_KIND}` = 'run' and tags.benchmark = '{p.bench.name}'",
        max_results=1000)
        if r.info.run_id != run_id and r.data.tags.get("model") == label and tracking.TAG_PARENT not in r.data.tags]
    configs = {"": _result_params(tracking.safe_params(p.config.model_dump(mode="json")))}
    configs.update({r.info.run_id: _result_params(r.data.params) for r in others})
    labels = tracking.differing_labels(configs)

    def name(key: str) -> str:
        return redact_text(f"{base} {labels[key]}" if labels[key] else base)[:NAME_MAX]

    renamed = {r.info.run_id: name(r.info.run_id) for r in others
               if (r.info.run_name or "").startswith(base) and r.info.run_name != name(r.info.run_id)}
    return name(""), renamed


def bound_run(client, run_id: str | None, run_dir) -> str | None:
    """``run_id`` (the id a run directory holds) when the store still has that run and the run was made for this
    directory (its location tag; for a run logged before that tag, its directory name if it has one); else None, with
    a warning
    when the run exists but belongs to another directory (a copied directory, or an id copied in): the caller
    starts a new MLflow run instead of writing over another directory's record."""
    run_id = existing_run(client, run_id)
    if run_id is None:
        return None
    tags = client.get_run(run_id).data.tags
    here, named = redact_text(run_dir.uri), tags.get(tracking.TAG_RUN_LOCATION)
    if named == here or (named is None and tags.get(tracking.TAG_RUN_DIR, run_dir.name) == run_dir.name):
        return run_id
    log.warning("%s: its %s names MLflow run %s, which was made for %s; this directory gets a new MLflow run",
                here, RunDir.MLFLOW_ID, run_id, named or tags.get(tracking.TAG_RUN_DIR))
    return None


def existing_run(client, run_id: str | None) -> str | None:
    """``run_id`` when the store still has that run, else None."""
    import mlflow

    if run_id is None:
        return None
    try:
        return client.get_run(run_id).info.run_id
    except mlflow.exceptions.MlflowException:  # deleted, or logged to another store
        return None


def log_mlflow(p: RunPlan, rows: list[dict], metrics: dict, files: dict[str, Path], plots: list[Path],
               run_stats: dict, started: float, title: str | None = None, parent: str | None = None) -> str | None:
    """Log the run (and a child per setting) with its real wall-clock start (``started``, epoch
    seconds; a resumed run keeps its first start) and end; named ``title`` (default
    :func:`run_title`), under the MLflow run ``parent`` when given (a suite's subject run)."""
    cfg = p.config
    if not cfg.tracking.enabled:
        return None
    headline = tuple(caps.headline_metrics(p.bench)) + judge_failures.pinned(caps.judged_metrics(p.bench))
    # below a suite's subject run the view keeps the suite's `<entry>.<metric>` columns (the subject run sets them)
    exp_id = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment or p.bench.name, cfg.tracking.artifact_root,
                            () if parent else headline)
    client = tracking.client(cfg.tracking.uri)
    rd = RunDir(p.run_dir)
    run_id = bound_run(client, rd.mlflow_run_id(), p.run_dir)  # None: a new MLflow run (a copied directory too)
    renamed: dict[str, str] = {}
    if title:
        name = redact_text(title)  # names are shown everywhere: no credentials in them
    else:
        name, renamed = names_by_difference(client, exp_id, p, run_id, redact_text(run_title(p)))
    engine = cfg.engine
    protocol = protocol_record(p.bench, cfg.benchmark)
    judge = judge_protocol(cfg, p.bench)
    if judge is not None:  # who judged, with which sampling and prompts (runner.judges)
        protocol["judge"] = judge
    if cfg.rejudge is not None:
        protocol["rejudge_of"] = cfg.rejudge.source_config_hash
    if p.facts:  # what the engines learned while running (e.g. a constraint format the server took instead)
        protocol["run_facts"] = p.facts
    tags = tracking.run_tags("run", protocol, data_fingerprint(p), headline, benchmark=p.bench.name,
                             engine=engine.type, model=tracking.model_label(engine), **{
                                 tracking.TAG_CONFIG_HASH: fingerprint(cfg.semantic()),
                                 tracking.TAG_RUN_DIR: p.run_dir.name,
                                 tracking.TAG_RUN_LOCATION: redact_text(p.run_dir.uri)})
    if "provenance" in files:  # software, machine and model identity (the whole record is an artifact)
        tags.update(mlflow_tags(RunDir(files["provenance"].parent).provenance()))
    if parent:
        tags[tracking.TAG_PARENT] = parent
    if run_id is None:
        run_id = client.create_run(exp_id, start_time=int(started * 1000), tags=tags, run_name=name).info.run_id
        rd.set_mlflow_run_id(run_id)
    else:
        client.update_run(run_id, status="RUNNING", name=name)
        for k, v in tags.items():
            client.set_tag(run_id, k, v)
    tracking.log_params(client, run_id, cfg.model_dump(mode="json"))
    tracking.log_metrics(client, run_id, {**metrics, **run_stats})
    for f in list(files.values()) + plots:
        client.log_artifact(run_id, str(f))
    _log_children(p, rows, exp_id, run_id, tags, name, started)
    for other, other_name in renamed.items():  # the earlier runs now differ from this one: their names say how
        client.update_run(other, name=other_name)
    client.set_terminated(run_id, "FINISHED", end_time=int(time.time() * 1000))
    return run_id


def _setting_order(values: tuple) -> list:
    """Numbers by value (turns 2 before 10), then text."""
    return [(0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))
            for v in values]


def child_name(name: str, varying: list[str], setting: dict) -> str:
    """A setting's MLflow run: what tells it from its siblings (the group keys whose values vary) first, then
    the run's name (``turns=10 · prefeval · gemma``)."""
    return f"{setting_label(varying, setting)} · {name}"


def _log_children(p: RunPlan, rows: list[dict], exp_id: str, parent_id: str, tags: dict, name: str,
                  started: float) -> None:
    """One child run per setting (the benchmark's group keys), for side-by-side comparison.

    On resume the children already logged are found by their setting tag and their metrics
    are logged again (at the next step) when the samples behind them changed, so a child
    never keeps the numbers of samples that were since retried."""
    keys = caps.group_keys(p.bench)
    groups = group_rows(rows, keys)
    if len(groups) <= 1:
        return
    client = tracking.client(p.config.tracking.uri)
    existing = {r.data.tags.get(tracking.TAG_SETTING): r for r in client.search_runs(
        [exp_id], filter_string=f"tags.`{tracking.TAG_PARENT}` = '{parent_id}'")}
    varying = [k for i, k in enumerate(keys) if len({v[i] for v in groups}) > 1]
    for i, (values, rs) in enumerate(sorted(groups.items(), key=lambda kv: _setting_order(kv[0]))):
        setting = setting_label(keys, dict(zip(keys, values)))
        m = tracking.finite_metrics(caps.aggregate(p.bench, p.config.benchmark, rs, p.assets))
        digest = fingerprint([[r.get("sample_id"), r.get("status"), r.get("error")] for r in rs], 16)
        run = existing.get(setting)
        if run is None:
            child = client.create_run(exp_id, run_name=child_name(name, varying, dict(zip(keys, values))),
                                      start_time=int(started * 1000) + i,  # oldest first = setting order
                                      tags={**tags, tracking.TAG_SETTING: setting, tracking.TAG_PARENT: parent_id})
            child_id, step = child.info.run_id, 0
            tracking.log_params(client, child_id, {k: str(v) for k, v in zip(keys, values)})
        elif run.data.tags.get("llmrec.samples_digest") == digest:
            continue
        else:
            child_id, step = run.info.run_id, int(run.data.tags.get("llmrec.samples_step", "0")) + 1
        client.set_tag(child_id, "llmrec.samples_digest", digest)
        client.set_tag(child_id, "llmrec.samples_step", str(step))
        tracking.log_metrics(client, child_id, m, step)
        client.set_terminated(child_id, "FINISHED", end_time=int(time.time() * 1000))
