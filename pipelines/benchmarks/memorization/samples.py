"""Catalogue → probe rows: the keys asked (all, or a seeded draw kept in file order), each with its shots and, for
items, its popularity bucket (computed on the whole catalogue's ranking, so a slice keeps the full catalogue's
buckets)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from llmrec.errors import ConfigError
from llmrec.pipelines.benchmarks.memorization import catalogues
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig


def folder(cfg: MemorizationConfig, data_dir: Path | None) -> Path:
    rel = cfg.path or Path(catalogues.FOLDERS[cfg.catalogue])
    return rel if rel.is_absolute() or data_dir is None else Path(data_dir) / rel


def _picked(cfg: MemorizationConfig, n: int) -> list[int]:
    if cfg.items is not None and cfg.items < n:
        return sorted(np.random.default_rng(cfg.seed).choice(n, size=cfg.items, replace=False).tolist())
    return list(range(n))


def build(cfg: MemorizationConfig, cat: catalogues.Catalogue) -> list[dict]:
    if cfg.probe == "user":
        return build_users(cfg, cat)
    if cfg.probe == "interaction":
        return build_interactions(cfg, cat)
    if cfg.probe in ("year", "genres"):
        return build_attributes(cfg, cat)
    ids = list(cat.items["key"])
    titles = dict(zip(cat.items["key"], cat.items["title"]))
    ranks = catalogues.popularity_ranks(cat.popularity, ids) if cat.popularity is not None else {}
    rows = []
    for k in _picked(cfg, len(ids)):
        item = ids[k]
        shots = [i for i in ids if i != item][: cfg.shots]
        rank = ranks.get(item)
        rows.append({"sample_id": f"{cat.name}/item/{item}", "probe": "item", "catalogue": cat.name,
                     "dataset": cat.dataset, "sep": cat.sep, "key": item, "unit": item, "gold": titles[item],
                     "shot_ids": shots, "_shots": [[i, f"{i}{cat.sep}{titles[i]}"] for i in shots],
                     "popularity": cat.popularity.get(item, 0) if cat.popularity is not None else None,
                     "pop_rank": rank,
                     "pop_bucket": catalogues.bucket_of(rank, len(ranks), cfg.popularity_buckets)})
    return rows


def build_users(cfg: MemorizationConfig, cat: catalogues.Catalogue) -> list[dict]:
    """The user probe: the key is the user ID, the gold the user's whole line (ID included, as the reference
    compares it)."""
    if cat.users is None:
        raise ConfigError(f"memorization: probe 'user' needs user records, and catalogue '{cat.name}' has none "
                          "(ml-100k: u.user, ml-1m: users.dat)")
    ids = list(cat.users["key"])
    lines = dict(zip(cat.users["key"], cat.users["line"]))
    rows = []
    for k in _picked(cfg, len(ids)):
        user = ids[k]
        shots = [u for u in ids if u != user][: cfg.shots]
        rows.append({"sample_id": f"{cat.name}/user/{user}", "probe": "user", "catalogue": cat.name,
                     "dataset": cat.dataset, "sep": cat.sep, "key": user, "unit": user, "gold": lines[user],
                     "fields": cat.user_fields, "shot_ids": shots, "_shots": [[u, lines[u]] for u in shots]})
    return rows


def build_interactions(cfg: MemorizationConfig, cat: catalogues.Catalogue) -> list[dict]:
    """The interaction probe: users with more than ``history`` rows (a seeded draw of ``items`` of them, in order of
    first appearance); per user its rows ``history`` .. ``history + per_user - 1`` in file order, each asked after
    the ``shots`` first rows of the file (of other users) and the user's ``history`` rows just before it. The gold
    is the asked row ``<user><sep><item>`` (the reference's ``UserID::MovieID``)."""
    if cat.interactions is None:
        raise ConfigError(f"memorization: probe 'interaction' needs a rating file, and catalogue '{cat.name}' has "
                          "none here (ml-100k: u.data, ml-1m: ratings.dat)")
    sep, inter = cat.interaction_sep, cat.interactions
    seqs: dict[str, list[str]] = {}
    for u, i in zip(inter["user"], inter["item"]):
        seqs.setdefault(u, []).append(i)
    users = [u for u, seq in seqs.items() if len(seq) > cfg.history]
    rows = []
    for k in _picked(cfg, len(users)):
        user, seq = users[k], seqs[users[k]]
        shots = [f"{u}{sep}{i}" for u, i in zip(inter["user"], inter["item"]) if u != user][: cfg.shots]
        for pos in range(cfg.history, min(len(seq), cfg.history + cfg.per_user)):
            before = [f"{user}{sep}{i}" for i in seq[pos - cfg.history: pos]]
            rows.append({"sample_id": f"{cat.name}/interaction/{user}/{pos}", "probe": "interaction",
                         "catalogue": cat.name, "dataset": cat.dataset, "sep": sep, "key": user, "unit": user,
                         "position": pos, "gold": f"{user}{sep}{seq[pos]}", "shot_ids": [],
                         "_shots": [[x.split(sep)[0], x] for x in shots + before]})
    return rows


YEAR = re.compile(r"^(?P<title>.*\S)\s*\((?P<year>\d{4})\)\s*$")


def _attribute(probe: str, title: str, genres: str | None) -> tuple[str, str] | None:
    """(what the prompt shows after the ID, the gold) of one item, or None when it has no such attribute: year:
    the title without its trailing '(YYYY)' and the year; genres: the title and its genres."""
    if probe == "year":
        m = YEAR.match(title)
        return (m["title"], m["year"]) if m else None
    return (title, genres) if genres else None


def build_attributes(cfg: MemorizationConfig, cat: catalogues.Catalogue) -> list[dict]:
    """The attribute probes (MovieLens): the year from a title without it (``Input: 1|Toy Story|`` → ``1995``), or
    the genres from the ID and title (``Input: 1::Toy Story (1995)::`` → ``Animation|Children's|Comedy``); items
    without the attribute (no year in the title, no genre) are not asked."""
    if "genres" not in cat.items:
        raise ConfigError(f"memorization: probe '{cfg.probe}' needs MovieLens titles, and catalogue '{cat.name}' "
                          "has none")
    known = [(k, a) for k, t, g in zip(cat.items["key"], cat.items["title"], cat.items["genres"])
             if (a := _attribute(cfg.probe, t, g)) is not None]
    ranks = catalogues.popularity_ranks(cat.popularity, list(cat.items["key"])) if cat.popularity is not None else {}
    rows = []
    for k in _picked(cfg, len(known)):
        item, (shown, gold) = known[k]
        shots = [(i, a) for i, a in known if i != item][: cfg.shots]
        rank = ranks.get(item)
        rows.append({"sample_id": f"{cat.name}/{cfg.probe}/{item}", "probe": cfg.probe, "catalogue": cat.name,
                     "dataset": cat.dataset, "sep": cat.sep, "key": f"{item}{cat.sep}{shown}", "unit": item,
                     "gold": gold, "shot_ids": [i for i, _ in shots],
                     "_shots": [[f"{i}{cat.sep}{s}", f"{i}{cat.sep}{s}{cat.sep}{a}"] for i, (s, a) in shots],
                     "popularity": cat.popularity.get(item, 0) if cat.popularity is not None else None,
                     "pop_rank": rank,
                     "pop_bucket": catalogues.bucket_of(rank, len(ranks), cfg.popularity_buckets)})
    return rows
