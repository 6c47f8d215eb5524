"""Train (or load) baselines, rank a benchmark's candidates, score with its score task, log to MLflow."""

from __future__ import annotations

import json
import logging
import time
from functools import partial
from pathlib import Path

import yaml

from llmrec import storage, tracking
from llmrec.config import fingerprint, validate
from llmrec.errors import ConfigError, DataError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.common.jsonio import iter_jsonl
from llmrec.models.base import build_model
from llmrec.models.candidates import rank_candidates, round_robin_pool, tied_within
from llmrec.models.evaluation import EvalConfig, evaluate
from llmrec.models.trainer import load_checkpoint
from llmrec.pipelines.baselines.config import BaselinesConfig, ModelEntry
from llmrec.pipelines.protocol import Ranker
from llmrec.pipelines.registry import BENCHMARKS, SCORE_TASKS
from llmrec.rundir import RunDir, dumps_json
from llmrec.tuning.api import train_from_config
from llmrec.tuning.config import TrainConfig
from llmrec.tuning.run_files import RunFiles
from llmrec.tuning.trainable import prepare_data

log = logging.getLogger(__name__)
CANDIDATE_KEYS = ("user_id", "candidates", "ids", "line")


def read_candidates(path: Path) -> list[dict]:
    out = []
    for no, obj in iter_jsonl(path, "candidates file", "write one with `llmrec <benchmark> candidates`"):
        missing = [k for k in CANDIDATE_KEYS if k not in obj]
        if missing or len(obj["candidates"]) != len(obj["ids"]):
            raise DataError(f"{path}: line {no} needs {list(CANDIDATE_KEYS)} with one id per candidate "
                            f"(missing {missing})")
        out.append(obj)
    if not out:
        raise DataError(f"{path}: no candidates")
    return out


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def cut_histories(base: dict, out: Path, n: int) -> dict:
    """Every user's last ``n + 1`` interactions (n history items + the target) as parquet; returns the data
    section that reads them. Leave-one-out then trains on n - 1 items, validates on the n-th, and ranks with
    the n items before the target, as the LLM sees them."""
    from llmrec.interactions import FilterConfig, apply_filters, load_interactions
    from llmrec.interactions.config import DataSpec
    from llmrec.interactions.schema import ITEM_ID, TIMESTAMP, TITLE, USER_ID

    spec = validate(DataSpec, dict(base["data"]), "base.data")
    data = load_interactions(spec)
    inter = apply_filters(data.interactions, validate(FilterConfig, dict(base.get("filters") or {}), "base.filters"),
                          data.source)
    kept = inter.sort_values([USER_ID, TIMESTAMP], kind="stable").groupby(USER_ID, sort=False).tail(n + 1)
    folder = (out / f"history_cut_{n}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    kept.reset_index(drop=True).to_parquet(folder / "interactions.parquet", index=False)
    section = {"format": "parquet", "path": str(folder / "interactions.parquet")}
    if data.items is not None:
        data.items[[ITEM_ID, TITLE]].to_parquet(folder / "items.parquet", index=False)
        section["items_path"] = str(folder / "items.parquet")
        section["missing_items"] = spec.missing_items
    return section


def label_of(entry: ModelEntry, model_name: str) -> str:
    base = entry.label or model_name
    return f"{base}-h{entry.history_cut}" if entry.history_cut and not entry.label else base


def train_config(base: dict, entry: ModelEntry) -> dict:
    """A model entry's `llmrec train` config: the shared ``base``, the entry's ``train`` over it, its model."""
    return _merge(_merge(base, entry.train), {"model": entry.model})


def entry_label(entry: ModelEntry) -> str:
    """The entry's label known before training: ``label``, else the model's name (a given run: its folder's name)."""
    name = entry.model.get("name", "model") if entry.model else entry.run_dir.rstrip("/").rpartition("/")[2]
    return label_of(entry, name)


def trained_run(base: dict, out: Path, entry: ModelEntry) -> str:
    """The entry's run directory (a local path or a URI): given, or trained now through
    `llmrec train`'s own path on the shared train config ``base`` (train config files under ``out``)."""
    if entry.run_dir is not None:
        return storage.resolve(entry.run_dir)
    train = train_config(base, entry)
    if entry.history_cut is not None:
        train["data"] = cut_histories(base, out, entry.history_cut)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"train_{label_of(entry, entry.model['name'])}.yaml"
    path.write_text(yaml.safe_dump(train, sort_keys=False), encoding="utf-8")
    return str(train_from_config(str(path), [], fresh=True)["run_dir"])  # trained anew each time, as before


def load_run(run_dir: str | Path):
    """(model, data, train config) of a `llmrec train` run directory: a local folder or a URI
    (read through the same ``RunFiles`` that wrote it: a URI's checkpoint is fetched to a
    temporary folder, removed afterwards)."""
    where = storage.resolve(str(run_dir))
    rd = RunDir(where)
    if not rd.has_config():
        raise ConfigError(f"{run_dir} is not a `llmrec train` run directory (no {RunDir.CONFIG})")
    parent, _, name = where.rstrip("/").rpartition("/")
    files = RunFiles(parent, name)
    try:
        raw = rd.config()
        # the recorded config lists every data field; readers reject options they do not use, so drop the unset ones
        raw["data"] = {k: v for k, v in (raw.get("data") or {}).items() if v not in (None, {}, [])}
        tcfg = validate(TrainConfig, raw, f"{where}/{RunDir.CONFIG}")
        data = prepare_data(tcfg)
        model = build_model(tcfg.model, data)
        if model.trainable:
            files.fetch("checkpoint")
            load_checkpoint(model, files.work / "checkpoint")
        else:
            model.fit(data)
    finally:
        files.close()
    return model, data, tcfg


def trained_ranker(base: dict, out: Path, entry: ModelEntry) -> Ranker:
    """The entry's model (trained now, or read from its run directory) as a ``Ranker`` of candidates."""
    model, data, _ = load_run(trained_run(base, out, entry))
    return partial(rank_candidates, model, data)


def prediction_lines(cands: list[dict], ranked_raw: list[list[str]], list_len: int) -> list[dict]:
    out = []
    for c, ranked in zip(cands, ranked_raw):
        to_id = dict(zip(c["candidates"], c["ids"]))
        ids = [to_id[r] for r in ranked[:list_len]]
        out.append(dict(c["line"], ranked=ids + [0] * (list_len - len(ids))))
    return out


def _owner(task: str):
    for name in BENCHMARKS.names():
        bench = BENCHMARKS.get(name)
        if any(t.name == task for t in caps.score_tasks(bench)):
            return bench
    return None


def score_and_log(cfg: BaselinesConfig, label: str, lines: list[dict], run_dir: str, tcfg: TrainConfig,
                  seconds: float, extra: dict | None = None) -> dict:
    task = SCORE_TASKS.get(cfg.score_task)
    path = cfg.out / f"predictions_{label}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    metrics = {**task.run(lines, {**cfg.score_options, "predictions": str(path)}), **(extra or {})}
    (cfg.out / f"metrics_{label}.json").write_text(dumps_json({"metrics": metrics}), encoding="utf-8")
    if cfg.tracking.enabled:
        _log(cfg, label, metrics, path, run_dir, tcfg, seconds)
    return metrics


def _log(cfg, label, metrics, path, run_dir, tcfg, seconds) -> None:
    import mlflow

    bench = _owner(cfg.score_task)
    exp = tracking.setup(cfg.tracking.uri, cfg.tracking.experiment or cfg.score_task, cfg.tracking.artifact_root)
    heads = caps.headline_metrics(bench) if bench is not None else ()
    with mlflow.start_run(experiment_id=exp, run_name=f"baseline-{label}"):
        mlflow.set_tags({"git_commit": tracking.git_commit(), "llmrec.kind": "baseline",
                         "llmrec.headline": ",".join(heads), "llmrec.setting": f"baseline={label}",
                         "benchmark": bench.name if bench is not None else cfg.score_task, "model": tcfg.model.name,
                         "engine": "baseline", "data_fingerprint": fingerprint(str(cfg.candidates), 16),
                         "protocol": json.dumps({"split": tcfg.split.model_dump(mode="json"),
                                                 "candidates": str(cfg.candidates)}, sort_keys=True, default=str)})
        mlflow.log_params(tracking.safe_params({"model": tcfg.model.model_dump(mode="json"),
                                                "baseline": {"run_dir": str(run_dir), "label": label,
                                                             "score_task": cfg.score_task, "list_len": cfg.list_len}}))
        mlflow.log_metrics(tracking.finite_metrics({**metrics, "rank_seconds": seconds}))
        mlflow.log_artifact(str(path))


def full_topk(model, data, users: list[str], k: int) -> dict[str, list[str]]:
    """Each user's top-k over the whole catalogue (history excluded), raw ids."""
    res = evaluate(model, data, "test", EvalConfig(), keep_topk=k)
    ids = res.per_user["user_id"].astype(str).tolist()
    top = {u: [str(data.item_ids[i]) for i in row] for u, row in zip(ids, res.topk_items)}
    return {u: top.get(u, []) for u in users}


def run_baselines(cfg: BaselinesConfig) -> dict[str, dict]:
    from llmrec.rundir import refuse_inside_runs

    refuse_inside_runs(cfg.out, "out:")  # a folder of predictions and metrics of its own, never inside a run
    cands = read_candidates(cfg.candidates)
    users = [str(c["user_id"]) for c in cands]
    results, tops = {}, []
    for entry in cfg.models:
        run_dir = trained_run(cfg.base, cfg.out, entry)
        model, data, tcfg = load_run(run_dir)
        label = label_of(entry, tcfg.model.name)
        t0 = time.perf_counter()
        ranked = rank_candidates(model, data, users, [list(map(str, c["candidates"])) for c in cands])
        lines = prediction_lines(cands, ranked, cfg.list_len)
        tied = [bool(tied_within(r, cfg.list_len)) for r in ranked]  # equal scores decided the top list
        results[label] = score_and_log(cfg, label, lines, run_dir, tcfg, time.perf_counter() - t0,
                                       {"n_tied": float(sum(tied)), "tied_share": sum(tied) / len(tied)}
                                       if tied else None)
        if cfg.pool is not None:
            tops.append(full_topk(model, data, users, cfg.pool.topk))
    if cfg.pool is not None:
        path = cfg.out / cfg.pool.out
        with open(path, "w", encoding="utf-8") as fh:
            for u in users:
                fh.write(json.dumps({"user_id": u, "candidates": round_robin_pool([t[u] for t in tops],
                                                                                  cfg.pool.size)}) + "\n")
    return results
