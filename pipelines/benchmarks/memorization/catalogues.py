"""Catalogue files → items (id, title, file order) and item popularity (unique users who rated / played each item).

Each catalogue keeps its own line format: the probe shows lines as the file writes them (``id<sep>title``).
ML-100K ``u.item`` (``id|title|date|video date|IMDb URL|19 genre flags``, latin-1) with ratings ``u.data``
(``user\\titem\\trating\\ttime``); ML-1M ``movies.dat`` (``MovieID::Title::Genres``, latin-1), ratings
``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``) only when present (the shared copy has none); Last.fm
(HetRec 2011) ``artists.dat`` (``id\\tname\\turl\\tpictureURL``, a header line) with ``user_artists.dat``.
Interactions (the interaction probe): the rating file's (user, item) rows in file order. User records (the user
probe): ML-100K ``u.user`` (``user id|age|gender|occupation|zip code``), ML-1M ``users.dat``
(``UserID::Gender::Age::Occupation::Zip-code``); Last.fm has none. Genres (the genres probe): ML-1M's third field,
ML-100K's 19 flags named by ``u.genre``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from llmrec.errors import ConfigError


@dataclass(frozen=True)
class Catalogue:
    name: str
    dataset: str  # the dataset's name in the prompt
    sep: str  # the file's field separator, shown in the prompt lines
    items: pd.DataFrame  # key (the item ID, str), title, genres ('|'-joined or None; MovieLens), in file order
    popularity: dict[str, int] | None  # item ID -> unique users; None: the folder has no interactions
    popularity_source: str | None
    users: pd.DataFrame | None = None  # key (the user ID), line (the whole user line), in file order; None: no file
    user_fields: str | None = None  # the user line's fields after the ID, as the prompt names them
    interactions: pd.DataFrame | None = None  # user, item (str), in file order; None: no rating file
    interaction_sep: str | None = None  # the rating file's field separator


FOLDERS = {"ml-100k": "ml-100k", "ml-1m": "ml-1m", "lastfm": "hetrec2011-lastfm-2k",
           "amazon-beauty": "amazon-all-beauty-2023"}
FORMATS = {"ml-100k": "movielens-100k", "ml-1m": "movielens-1m", "lastfm": "hetrec-lastfm", "amazon-beauty": "amazon"}
"""The interaction reader of each catalogue's folder: the probe names its catalogue as the recommendation benchmarks
name the data they read (``DataSpec.catalogue``), so their rows can be split by what the probe found memorized."""


def catalogue_id(name: str) -> str:
    from llmrec.interactions.config import DataSpec

    return DataSpec(format=FORMATS[name], path=FOLDERS[name]).catalogue()


def _need(path: Path, what: str) -> Path:
    if not path.is_file():
        raise ConfigError(f"memorization: {what} not found at {path} (benchmark.path / the data directory)")
    return path


def _rows(path: Path, sep: str, n_fields: int, what: str, skip_header: bool = False,
          encoding: str = "latin-1") -> list[list[str]]:
    out = []
    lines = [x.rstrip("\r") for x in path.read_text(encoding=encoding).split("\n")]  # not splitlines: U+0085 is text
    for no, line in enumerate(lines[1:] if skip_header else lines, start=2 if skip_header else 1):
        if not line.strip():
            continue
        parts = line.split(sep)
        if len(parts) < n_fields or not parts[0].strip():
            raise ConfigError(f"memorization: {path} line {no}: a {what} line needs {n_fields} fields separated by "
                              f"{sep!r}, got {line[:80]!r}")
        out.append(parts)
    return out


def _flag_genres(rows: list[list[str]], genre_file: Path) -> list[str | None]:
    """ML-100K's 19 genre flags (the last fields of u.item) as names from u.genre, joined by '|' in u.genre's order
    (as ML-1M writes them); None without u.genre or a flag set."""
    if not genre_file.is_file():
        return [None] * len(rows)
    names = [x.split("|")[0] for x in genre_file.read_text(encoding="latin-1").split("\n") if x.strip()]
    out = []
    for r in rows:
        flags = r[-len(names):] if len(r) >= 5 + len(names) else []
        picked = [n for n, f in zip(names, flags) if f.strip() == "1"]
        out.append("|".join(picked) or None)
    return out


def _pairs(rows: list[list[str]]) -> pd.DataFrame:
    return pd.DataFrame({"user": [r[0] for r in rows], "item": [r[1] for r in rows]})


def _unique_users(pairs: pd.DataFrame) -> dict[str, int]:
    return {str(k): int(v) for k, v in pairs.groupby("item")["user"].nunique().items()}


def _users(path: Path, sep: str, what: str) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    rows = _rows(path, sep, 5, what)
    return pd.DataFrame({"key": [r[0] for r in rows], "line": [sep.join(r) for r in rows]})


def load(name: str, folder: Path) -> Catalogue:
    if name == "ml-100k":
        rows = _rows(_need(folder / "u.item", "ML-100K u.item"), "|", 2, "u.item")
        items = pd.DataFrame({"key": [r[0] for r in rows], "title": [r[1] for r in rows],
                              "genres": _flag_genres(rows, folder / "u.genre")})
        ratings = folder / "u.data"
        inter = _pairs(_rows(ratings, "\t", 2, "u.data")) if ratings.is_file() else None
        return Catalogue(name, "MovieLens 100K", "|", items, _unique_users(inter) if inter is not None else None,
                         "u.data" if inter is not None else None, _users(folder / "u.user", "|", "u.user"),
                         "age, gender, occupation, zip code", inter, "\t")
    if name == "ml-1m":
        rows = _rows(_need(folder / "movies.dat", "ML-1M movies.dat"), "::", 2, "movies.dat")
        items = pd.DataFrame({"key": [r[0] for r in rows], "title": [r[1] for r in rows],
                              "genres": [r[2] if len(r) > 2 and r[2] else None for r in rows]})
        ratings = folder / "ratings.dat"
        inter = _pairs(_rows(ratings, "::", 2, "ratings.dat")) if ratings.is_file() else None
        return Catalogue(name, "MovieLens 1M", "::", items, _unique_users(inter) if inter is not None else None,
                         "ratings.dat" if inter is not None else None, _users(folder / "users.dat", "::", "users.dat"),
                         "Gender, Age, Occupation, Zip-code", inter, "::")
    if name == "lastfm":
        rows = _rows(_need(folder / "artists.dat", "Last.fm artists.dat"), "\t", 2, "artists.dat", skip_header=True,
                     encoding="utf-8")
        items = pd.DataFrame({"key": [r[0] for r in rows], "title": [r[1] for r in rows]})
        plays = folder / "user_artists.dat"
        pop = (_unique_users(_pairs(_rows(plays, "\t", 2, "user_artists.dat", skip_header=True)))
               if plays.is_file() else None)
        return Catalogue(name, "Last.fm (HetRec 2011)", "\t", items, pop,
                         "user_artists.dat" if pop is not None else None)
    if name == "amazon-beauty":
        return _amazon_beauty(name, folder)
    raise ConfigError(f"memorization: unknown catalogue {name!r} (known: {', '.join(FOLDERS)})")


def _amazon_beauty(name: str, folder: Path) -> Catalogue:
    """Amazon Reviews 2023 All Beauty (the shared filtered copy): ``filterd_meta_items.csv`` (columns ``title``,
    ``parent_asin``; a CSV, so the prompt lines are ``<parent_asin>::<title>``, the reference's ML-1M form), popularity
    from ``filtered_user_reviews.json`` (``[{user_id, reviews: [{parent_asin, …}]}]``)."""
    import json

    meta = _need(folder / "filterd_meta_items.csv", "Amazon All Beauty filterd_meta_items.csv")
    try:
        df = pd.read_csv(meta, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as e:
        raise ConfigError(f"memorization: {meta}: not a readable CSV ({e})") from e
    missing = [c for c in ("title", "parent_asin") if c not in df.columns]
    if missing:
        raise ConfigError(f"memorization: {meta}: no column {', '.join(missing)} (columns: {', '.join(df.columns)})")
    df = df[(df["parent_asin"].str.strip() != "") & (df["title"].str.strip() != "")].drop_duplicates("parent_asin")
    items = pd.DataFrame({"key": df["parent_asin"].str.strip().tolist(), "title": df["title"].str.strip().tolist()})
    reviews = folder / "filtered_user_reviews.json"
    pop = None
    if reviews.is_file():
        pairs = [(u.get("user_id"), r.get("parent_asin")) for u in json.loads(reviews.read_text(encoding="utf-8"))
                 for r in u.get("reviews") or []]
        pop = _unique_users(pd.DataFrame(pairs, columns=["user", "item"]).dropna())
    return Catalogue(name, "Amazon Reviews 2023 All Beauty", "::", items, pop,
                     "filtered_user_reviews.json" if pop is not None else None)


def popularity_ranks(popularity: dict[str, int], order: list[str]) -> dict[str, int]:
    """1-based rank of each item with interactions, most popular first (as the reference sorts by unique users,
    descending); ties broken by file order (``order``), which the reference leaves to its sort."""
    pos = {i: k for k, i in enumerate(order)}
    ranked = sorted(popularity, key=lambda i: (-popularity[i], pos.get(i, len(pos)), i))
    return {item: k + 1 for k, item in enumerate(ranked)}


def bucket_edges(n_ranked: int, shares: list[float]) -> list[int]:
    """The reference's percentile buckets: each share p ends a bucket at rank ceil(n * p) (at least 1, at most n),
    and the last bucket always ends at n. [0.2, 0.8] → [ceil(0.2 n), n]: the top 20 % and the rest."""
    edges = [min(n_ranked, max(1, math.ceil(n_ranked * p))) for p in shares]
    edges[-1] = n_ranked
    return edges


def bucket_labels(shares: list[float]) -> list[str]:
    """One label per bucket, by its share range of the ranking: [0.2, 0.8] → ['top0-20', 'top20-100']."""
    ends = [round(p * 100) for p in shares[:-1]] + [100]
    starts = [0] + ends[:-1]
    return [f"top{a}-{b}" for a, b in zip(starts, ends)]


def bucket_of(rank: int | None, n_ranked: int, shares: list[float]) -> str | None:
    if rank is None:
        return None
    for edge, label in zip(bucket_edges(n_ranked, shares), bucket_labels(shares)):
        if rank <= edge:
            return label
    return None
