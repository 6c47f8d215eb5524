"""Rating tables → PerRecBench samples: one per (test group, mode).

A sample carries the score-contract fields (``group_id, mode, relative_ratings,
avg_ratings, ratings``, later ``prediction``) and, in ``_``-prefixed fields the runner drops
after use, what rendering needs: per user the BM25-retrieved history, the most recent
items for the profile generator, the rating statistics, and the few-shot material.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from llmrec.errors import DataError
from llmrec.pipelines.common.seeding import stable_rng
from llmrec.pipelines.benchmarks.perrecbench import prompts
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.groups import build_groups, most_common, prepare
from llmrec.pipelines.benchmarks.perrecbench.metrics import ordering_from_values
from llmrec.pipelines.benchmarks.perrecbench.retrieval import top_k

log = logging.getLogger(__name__)

SHOT_MIN_POSITION = 12  # the reference draws point shots from the user's history positions 12..


def load_frames(cfg: PerRecBenchConfig, data_dir: Path | None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(interactions, items) through the interaction data layer (``llmrec.interactions``)."""
    from llmrec.interactions import load_interactions

    spec = cfg.data if cfg.data.dir is not None or data_dir is None else cfg.data.model_copy(update={"dir": data_dir})
    data = load_interactions(spec)
    return data.interactions, data.items


class _Catalog:
    """item_id → {"item_id", "title", "author"} from the item table (author when present)."""

    def __init__(self, items: pd.DataFrame | None):
        self.items: dict[str, dict] = {}
        self.untitled = 0
        if items is None:
            return
        authors = items["author"] if "author" in items.columns else pd.Series([None] * len(items))
        for item_id, title, author in zip(items["item_id"].astype(str), items["title"], authors):
            self.items[item_id] = {"item_id": item_id, "title": "" if pd.isna(title) else str(title),
                                   "author": _author(author)}

    def get(self, item_id: str) -> dict:
        item = self.items.get(item_id)
        if item is None or not item["title"]:
            self.untitled += 1
            return {"item_id": item_id, "title": item_id, "author": item["author"] if item else None}
        return item


def _author(value: object) -> str | None:
    """An author name: a string, or the ``name`` of an Amazon-2023 author record; else None."""
    if isinstance(value, dict):
        value = value.get("name")
    if isinstance(value, str):
        return value.strip() or None
    return None


class _Histories:
    """Each user's ratings in time order, for history cuts, retrieval and profiles."""

    def __init__(self, prepared: pd.DataFrame, catalog: _Catalog):
        self.catalog = catalog
        self.by_user = {str(u): rows for u, rows in prepared.groupby("user_id", sort=False)}

    def before(self, user_id: str, ts: int) -> list[dict]:
        rows = self.by_user[user_id]
        n = int(np.searchsorted(rows["timestamp"].to_numpy(), ts, side="left"))
        return [dict(self.catalog.get(i), rating=float(r))
                for i, r in zip(rows["item_id"].iloc[:n], rows["rating"].iloc[:n])]

    def all_ratings(self, user_id: str) -> list[float]:
        return [float(r) for r in self.by_user[user_id]["rating"]]


def _retrieve(history: list[dict], query: dict, k: int) -> list[dict]:
    docs = [prompts.encode_item(h) for h in history]
    return [history[i] for i in top_k(docs, prompts.encode_query(query), k)]


def user_record(user: dict, query: dict, hist: _Histories, cfg: PerRecBenchConfig) -> dict:
    history = hist.before(user["user_id"], user["timestamp"])
    if len(history) != user["history_len"]:
        raise DataError(f"perrecbench: user {user['user_id']} has {len(history)} ratings before "
                        f"{user['timestamp']}, the group says {user['history_len']}")
    ratings = [h["rating"] for h in history] if cfg.groups.mean_mode == "before_query" \
        else hist.all_ratings(user["user_id"])
    return {"key": f"{user['user_id']}@{user['timestamp']}", "user_id": user["user_id"],
            "avg_rating": user["avg_rating"], "most_common_rating": most_common(ratings),
            "retrieved": _retrieve(history, query, cfg.prompt.k),
            "profile_items": history[-cfg.prompt.profile_items:], "_history": history}


def _point_shots(rec: dict, n: int, cfg: PerRecBenchConfig, seed_parts: tuple) -> list[dict]:
    history = rec["_history"]
    pool = list(range(SHOT_MIN_POSITION, len(history)))
    if len(pool) < n:
        pool = list(range(1, len(history)))
    shots = []
    for pos in stable_rng(cfg.groups.seed, "perrecbench-shots", *seed_parts).sample(pool, min(n, len(pool))):
        item = {k: history[pos][k] for k in ("item_id", "title", "author")}
        shot_user = {k: v for k, v in rec.items() if k != "_history"}
        shot_user["retrieved"] = _retrieve(history[:pos], item, cfg.prompt.k)
        shots.append({"users": [shot_user], "item": item,
                      "answer": json.dumps({"predicted_rating": float(f"{history[pos]['rating']:.1f}")})})
    return shots


def _group_shots(mode: str, pool: list[dict], n: int, cfg: PerRecBenchConfig, records, seed_parts: tuple):
    rng = stable_rng(cfg.groups.seed, "perrecbench-shots", *seed_parts)
    shots = []
    for g in rng.sample(pool, min(n, len(pool))):
        users = records(g)
        rel = [u["relative_rating"] for u in g["users"]]
        if mode == "list":
            answer = json.dumps({"predicted_ranking": ordering_from_values(rel)})
        else:
            a, b = rng.sample(range(len(users)), 2)
            users, answer = [users[a], users[b]], "[User A]" if rel[a] > rel[b] else "[User B]"
        shots.append({"users": users, "item": records.query(g), "answer": answer})
    return shots


class _Records:
    """Memoized user records of a group (retrieval runs once per group)."""

    def __init__(self, hist: _Histories, cfg: PerRecBenchConfig):
        self.hist, self.cfg, self.memo = hist, cfg, {}

    def query(self, group: dict) -> dict:
        return self.hist.catalog.get(group["item_id"])

    def __call__(self, group: dict, keep_history: bool = False) -> list[dict]:
        if group["group_id"] not in self.memo:
            q = self.query(group)
            self.memo[group["group_id"]] = [user_record(u, q, self.hist, self.cfg) for u in group["users"]]
        recs = self.memo[group["group_id"]]
        return recs if keep_history else [{k: v for k, v in r.items() if k != "_history"} for r in recs]


def build_from_frames(cfg: PerRecBenchConfig, interactions: pd.DataFrame, items: pd.DataFrame | None,
                      data_dir: Path | None = None) -> list[dict]:
    """Samples for ``cfg.levels × cfg.modes`` (group-major order; ``cfg.limit`` keeps the first)."""
    prepared = prepare(interactions, cfg.groups)
    groups = build_groups(interactions, cfg.groups, cfg.levels, prepared)
    return samples_from_groups(cfg, prepared, groups, items, data_dir)


def samples_from_groups(cfg: PerRecBenchConfig, prepared: pd.DataFrame, groups: list[dict],
                        items: pd.DataFrame | None, data_dir: Path | None = None, split: str = "test") -> list[dict]:
    """Samples of the groups whose ``split`` is ``split`` (few-shot material from the "heldout" ones);
    ``prepared``: ``groups.prepare(...)`` of the rating table the groups were built from."""
    catalog = _Catalog(items)
    records = _Records(_Histories(prepared, catalog), cfg)
    templates = {m: prompts.load_templates(cfg.prompt, m, data_dir) for m in cfg.modes}
    heldout = {lv: [g for g in groups if g["split"] == "heldout" and g["level"] == lv] for lv in cfg.levels}
    tests = [g for g in groups if g["split"] == split]
    short = {lv: len(pool) for lv, pool in heldout.items() if len(pool) < cfg.prompt.shots}
    if short and {"pair", "list"} & set(cfg.modes):
        log.warning("perrecbench: fewer held-out groups than prompt.shots=%d at %s; those levels get fewer "
                    "demonstrations", cfg.prompt.shots, short)
    pairs = [(g, m) for g in tests for m in cfg.modes][: cfg.limit or None]
    out = []
    for g, mode in pairs:
        users = records(g, keep_history=mode == "point" and cfg.prompt.shots > 0)
        shots: list = []  # point: one list per user; pair/list: one list for the group
        if cfg.prompt.shots and mode == "point":
            shots = [_point_shots(u, cfg.prompt.shots, cfg, (g["group_id"], i)) for i, u in enumerate(users)]
            users = [{k: v for k, v in u.items() if k != "_history"} for u in users]
        elif cfg.prompt.shots:
            shots = _group_shots(mode, heldout[g["level"]], cfg.prompt.shots, cfg, records, (g["group_id"], mode))
        out.append(_sample(g, mode, users, records.query(g), shots, templates[mode]))
    if catalog.untitled:
        log.warning("perrecbench: %d item lookups had no title; the item id stands in", catalog.untitled)
    log.info("perrecbench: %d test groups, %d held-out groups, %d samples", len(tests),
             sum(len(v) for v in heldout.values()), len(out))
    return out


def _sample(g: dict, mode: str, users: list[dict], query: dict, shots: list, templates: dict) -> dict:
    return {
        "sample_id": f"{g['group_id']}/{mode}", "group_id": g["group_id"], "level": g["level"], "mode": mode,
        "size": len(users), "item_id": g["item_id"], "window": g["window"],
        "user_ids": [u["user_id"] for u in g["users"]],
        "relative_ratings": [u["relative_rating"] for u in g["users"]],
        "avg_ratings": [u["avg_rating"] for u in g["users"]],
        "ratings": [u["rating"] for u in g["users"]],
        "item_avg_ratings": [u["item_avg_rating"] for u in g["users"]],
        "prediction": None, "prefix_key": f"perrecbench/{mode}/{g['level']}",
        "_query": query, "_users": users, "_shots": shots, "_templates": templates,
    }
