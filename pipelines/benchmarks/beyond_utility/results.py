"""Rows → contract lines → metrics, per setting, plus CandDif, compliance and accuracy by position.

Title → id mapping needs the whole catalog: the benchmark's assets (``catalog``, read on the driver
by ``assets``) carry it, and every function here that maps titles receives them. Every sample
carries the ``catalog_key`` of the catalog it was built from; rows of another catalog are refused.
"""

from __future__ import annotations

import math

import numpy as np

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.beyond_utility import parsing
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.benchmarks.beyond_utility.contract import check_predictions
from llmrec.pipelines.benchmarks.beyond_utility.dataset import Dataset
from llmrec.pipelines.benchmarks.beyond_utility.metrics import compute, hits_and_ndcg, mostpop_hits
from llmrec.pipelines.benchmarks.beyond_utility.stages import rank_state, titles
from llmrec.pipelines.common import reask
from llmrec.pipelines.protocol import Outcome, Ranker, setting_label

SETTING_KEYS = ("prompt", "history_shown", "order")
CONTRACT_KEYS = ("user_id", "target", "candidates", "ranked", "history_len", "base_candidates")


def catalog(cfg: BeyondUtilityConfig, ds: Dataset, key: str) -> dict:
    """The benchmark's assets: the dataset, its title index and the key its samples carry."""
    return {"dataset": ds, "titles": parsing.TitleIndex(ds.titles, cfg.title_match, cfg.fuzzy_threshold, cfg.padding),
            "catalog_key": key}


def lookup(assets: dict | None, row: dict) -> tuple[Dataset, parsing.TitleIndex]:
    """The catalog ``row`` was built from (a clear error when the assets are another one's)."""
    if assets is None or "dataset" not in assets:
        raise DataError("Beyond Utility maps titles with its catalog: pass the benchmark's assets(cfg, data_dir)")
    if row.get("catalog_key") != assets["catalog_key"]:
        raise DataError(f"row {row.get('sample_id')!r} was built from catalog {row.get('catalog_key')!r}, not from "
                        f"this run's {assets['catalog_key']!r} (same config, other data?): start it with --fresh")
    return assets["dataset"], assets["titles"]


def setting_of(row: dict) -> str:
    return setting_label(SETTING_KEYS, row)


def answered(row: dict) -> bool:
    """Whether the row ranks something: a compliant LLM answer, or a trained baseline's ``ranked`` ids."""
    return "ranked" in row or bool(titles(row))


def contract_line(row: dict, assets: dict | None) -> dict:
    """One P.jsonl line; an answer that never complied ranks nothing (all 0); a baseline's row holds its ids."""
    _, index = lookup(assets, row)
    answer = titles(row)
    n = row["list_len"]
    if "ranked" in row:
        ranked = list(row["ranked"])
    else:
        ranked = index.ids(parsing.fit(answer, n)) if answer else [0] * n
    line = {k: row[k] for k in CONTRACT_KEYS if k != "ranked"}
    return dict(line, ranked=ranked)


def by_setting(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(setting_of(r), []).append(r)
    return out


def setting_metrics(cfg: BeyondUtilityConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
    ds, _ = lookup(assets, rows[0])
    users = check_predictions(enumerate((contract_line(r, assets) for r in rows), 1), cfg.k, "rows")
    m = compute(users, ds.catalog, cfg.k)
    asked = reask.tally(rank_state(r) for r in rows)
    m["compliance"] = 1 - asked.noncompliance if asked.attempts else math.nan
    m["unanswered"] = float(np.mean([not answered(r) for r in rows]))
    m["n_users"] = float(len(rows))
    return m


def _canddif(cfg: BeyondUtilityConfig, groups: dict[str, list[dict]], assets: dict | None) -> dict[str, float]:
    """CandDif = metric(target_first) − metric(shuffled), per (prompt, history) holding both orders."""
    orders: dict[str, dict[str, list[dict]]] = {}  # prompt and history setting → order → rows
    for rows in groups.values():
        orders.setdefault(setting_label(SETTING_KEYS[:-1], rows[0]), {})[rows[0]["order"]] = rows
    out = {}
    for prefix, by_order in orders.items():
        rows, twin = by_order.get("target_first"), by_order.get("shuffled")
        if not rows or not twin:
            continue
        if cfg.task == "reranking":  # only pools holding the target can show a position effect (paper §4.8)
            rows, twin = [r for r in rows if r["target"] in r["candidates"]], [r for r in twin if r["target"] in r["candidates"]]
            if not rows or not twin:
                continue
        a, b = setting_metrics(cfg, rows, assets), setting_metrics(cfg, twin, assets)
        for key in ("hr", "ndcg"):
            out[f"{prefix}/canddif_{key}" if len(groups) > 2 else f"canddif_{key}"] = a[key] - b[key]
    return out


def ranked_rows(samples: list[dict], assets: dict | None, rank: Ranker) -> list[dict]:
    """Every sample's candidates (as presented) ranked by a trained recommender: the sample with ``ranked``,
    the contract ids of its top ``list_len`` (the rows ``aggregate`` takes, one per LLM sample), and ``tied``:
    whether equal scores decided that top list (its order or membership), None when the ranker gives no scores."""
    ds, _ = lookup(assets, samples[0])
    raw = ds.raw_id
    from llmrec.models.candidates import tied_within

    tops = rank([str(s["user_id"]) for s in samples], [[raw[i] for i in s["candidates"]] for s in samples])
    return [dict({k: v for k, v in s.items() if not k.startswith("_")}, status="ok",
                 ranked=[ds.int_id[r] for r in top[: s["list_len"]]], tied=tied_within(top, s["list_len"]))
            for s, top in zip(samples, tops)]


def aggregate(cfg: BeyondUtilityConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
    rows = [r for r in rows if r.get("status", "ok") == "ok" or rank_state(r) is not None]
    if not rows:
        return {}
    groups = by_setting(rows)
    if len(groups) == 1:
        out = setting_metrics(cfg, rows, assets)
    else:
        out = {f"{name}/{k}": v for name, rs in groups.items() for k, v in setting_metrics(cfg, rs, assets).items()}
    out.update(_canddif(cfg, groups, assets))
    if cfg.task == "reranking":
        held = [r for r in rows if r["target"] in r["candidates"]]
        out["target_in_pool"] = len(held) / len(rows)
    tied = [bool(r["tied"]) for r in rows if r.get("tied") is not None]
    if tied:  # a trained baseline's rows: how often the candidates' given order broke a tie in the top list
        out["n_tied"], out["tied_share"] = float(sum(tied)), sum(tied) / len(tied)
    draw = rows[0].get("user_draw") or {}
    if draw.get("p_value") is not None:
        out["user_sampling_p"] = float(draw["p_value"])
    return out


def accuracy_by_position(cfg: BeyondUtilityConfig, rows: list[dict], assets: dict | None) -> dict[int, tuple[float, int]]:
    """1-based position of the target among the presented candidates → (HR, users)."""
    lines = check_predictions(enumerate((contract_line(r, assets) for r in rows), 1), cfg.k, "rows", unique=False)
    hit, _ = hits_and_ndcg(lines, cfg.k)
    out: dict[int, list[float]] = {}
    for line, h in zip(lines, hit):
        if line.target in line.candidates:
            out.setdefault(line.candidates.index(line.target) + 1, []).append(float(h))
    return {p: (float(np.mean(v)), len(v)) for p, v in sorted(out.items())}


PAIRED_METRICS = ("hr", "ndcg", "serendipity", "hallucination")


def paired_outcomes(cfg: BeyondUtilityConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
    """Per user and setting, the metrics that are means over users: ``hr`` and ``serendipity`` (binary),
    ``ndcg``, ``hallucination`` (the user's share of hallucinated slots; every list has the same length,
    so their mean is the pooled share). Answered rows only (``llmrec compare`` drops failed ones).
    Set-level metrics (``item_coverage``, gini, …) and ``compliance`` (a ratio of call counts) have no
    per-user value and are not compared. Cluster: the user, across prompt / history / order settings."""
    out = []
    for setting, rs in by_setting([r for r in rows if r.get("status", "ok") == "ok"]).items():
        ds, _ = lookup(assets, rs[0])
        users = check_predictions(enumerate((contract_line(r, assets) for r in rs), 1), cfg.k, "rows")
        hit, ndcg = hits_and_ndcg(users, cfg.k)
        values = {"hr": hit, "ndcg": ndcg, "serendipity": hit * (1 - mostpop_hits(users, ds.catalog, cfg.k)),
                  "hallucination": [float(np.mean(np.array(u.ranked) == 0)) for u in users]}
        for i, (r, u) in enumerate(zip(rs, users)):
            out += [Outcome(str(r["sample_id"]), setting, str(u.user_id), m, float(values[m][i]))
                    for m in PAIRED_METRICS]
    return out
