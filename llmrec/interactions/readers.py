"""Readers: public interaction formats -> the canonical schema (``schema.py``).

One entry point, ``load_interactions(spec)``, picks the reader by ``spec.format``:

========================  ==============================================================
format                    ``spec.path`` points at
========================  ==============================================================
``movielens-100k``        the folder with ``u.data`` (+ ``u.item``, ``u.user``; latin-1)
``movielens-1m``          the folder with ``ratings.dat`` (+ ``movies.dat``, ``users.dat``)
``recbole``               a RecBole ``.inter`` file or its folder (+ ``.item``/``.user``)
``hetrec-lastfm``         the folder with ``user_artists.dat`` (+ ``artists.dat``)
``amazon``                a review CSV(.gz) / JSON(L) file; ``items_path``: metadata
``csv`` / ``parquet``     any table; ``columns`` maps canonical -> source column names
========================  ==============================================================

Example::

    from llmrec.interactions import DataSpec, load_interactions
    data = load_interactions(DataSpec(format="movielens-100k", path="ml-100k"))
    data.interactions  # user_id, item_id, rating, timestamp
    data.items         # item_id, title, release_date, url, genres

A new format is one function decorated with ``@register_reader("name", options=...)``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from llmrec.errors import ConfigError, DataError
from llmrec.registry import Registry, expects
from llmrec.interactions.config import DataSpec
from llmrec.interactions.schema import (
    ITEM_ID,
    RATING,
    TIMESTAMP,
    TITLE,
    USER_ID,
    InteractionData,
    canonical_interactions,
    canonical_items,
    check_item_coverage,
)
from llmrec.interactions.textio import read_delimited, read_table, rename_columns, require_file

logger = logging.getLogger(__name__)

ReaderFn = Callable[[DataSpec, Path], InteractionData]
OPTIONAL_FIELDS = ("items_path", "columns", "item_columns", "sep")


@dataclass(frozen=True)
class Reader:
    """A registered reader and the optional ``DataSpec`` fields it understands."""

    fn: ReaderFn
    options: tuple[str, ...]


FORMATS: Registry[Reader] = Registry(
    "interaction format", check=expects("interaction format", lambda o: isinstance(o, Reader),
                                        "an llmrec.interactions.readers.Reader"))


def register_reader(name: str, options: tuple[str, ...] = ()) -> Callable[[ReaderFn], ReaderFn]:
    """Register ``fn(spec, resolved_path) -> InteractionData`` under ``name``."""

    def wrap(fn: ReaderFn) -> ReaderFn:
        FORMATS.register(name, Reader(fn, options))
        return fn

    return wrap


def load_interactions(spec: DataSpec | dict) -> InteractionData:
    """Read interactions (and items/users when the format has them) in the canonical schema.

    Raises ``ConfigError`` for an unknown format or an option the format does not use, and
    ``DataError`` naming the file and line for missing files, missing columns, NaN ratings,
    malformed lines and items absent from the item table (see ``spec.missing_items``).
    """
    if isinstance(spec, dict):
        spec = DataSpec.model_validate(spec)
    reader = FORMATS.get(spec.format)
    # an option counts as given when it differs from its default (a recorded config lists every field, defaults too)
    unused = [f for f in OPTIONAL_FIELDS if f not in reader.options
              and getattr(spec, f) != DataSpec.model_fields[f].get_default(call_default_factory=True)]
    if unused:
        raise ConfigError(
            f"data format '{spec.format}' does not use {unused}; it accepts: {list(reader.options) or 'none of them'}"
        )
    path = spec.resolve(spec.path)
    if path is None or not path.exists():
        raise DataError(
            f"data.path not found: {path} (format {spec.format}; relative paths resolve against data.dir / $LLMREC_DATA_DIR)"
        )
    data = check_item_coverage(reader.fn(spec, path), spec.missing_items)
    logger.info(
        "read %s: %d interactions, %d users, %d items",
        data.source,
        len(data.interactions),
        data.interactions[USER_ID].nunique(),
        data.interactions[ITEM_ID].nunique(),
    )
    return data


# --- MovieLens ---------------------------------------------------------------------------

ML_GENRES = (
    "unknown",
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)


@register_reader("movielens-100k")
def read_movielens_100k(spec: DataSpec, path: Path) -> InteractionData:
    """GroupLens ML-100K: ``u.data`` (tab: user item rating ts), ``u.item`` (``|``, latin-1), ``u.user``."""
    data_file = require_file(path / "u.data", "movielens-100k")
    raw = read_delimited(data_file, "\t", [USER_ID, ITEM_ID, RATING, TIMESTAMP])
    inter = canonical_interactions(raw, str(data_file))
    items = users = None
    if (path / "u.item").is_file():
        genres = ML_GENRES
        if (path / "u.genre").is_file():
            g = read_delimited(path / "u.genre", "|", ["name", "idx"], encoding="latin-1")
            genres = tuple(g["name"])
        names = [ITEM_ID, TITLE, "release_date", "video_release_date", "url", *[f"g{i}" for i in range(len(genres))]]
        it = read_delimited(path / "u.item", "|", names, encoding="latin-1")
        flags = it[[f"g{i}" for i in range(len(genres))]].to_numpy() == "1"
        it["genres"] = [[genres[j] for j in row.nonzero()[0]] for row in flags]
        items = canonical_items(it[[ITEM_ID, TITLE, "release_date", "url", "genres"]], str(path / "u.item"))
    if (path / "u.user").is_file():
        users = read_delimited(path / "u.user", "|", [USER_ID, "age", "gender", "occupation", "zip"]).reset_index(
            drop=True
        )
    return InteractionData(inter, items, users, source=str(data_file))


@register_reader("movielens-1m")
def read_movielens_1m(spec: DataSpec, path: Path) -> InteractionData:
    """GroupLens ML-1M: ``ratings.dat``, ``movies.dat``, ``users.dat``, ``::``-separated, latin-1."""
    ratings = require_file(path / "ratings.dat", "movielens-1m (ratings.dat is the interaction file)")
    inter = canonical_interactions(
        read_delimited(ratings, "::", [USER_ID, ITEM_ID, RATING, TIMESTAMP], encoding="latin-1"), str(ratings)
    )
    items = users = None
    if (path / "movies.dat").is_file():
        mv = read_delimited(path / "movies.dat", "::", [ITEM_ID, TITLE, "genres"], encoding="latin-1")
        mv["genres"] = mv["genres"].str.split("|")
        items = canonical_items(mv, str(path / "movies.dat"))
    if (path / "users.dat").is_file():
        names = [USER_ID, "gender", "age", "occupation", "zip"]
        users = read_delimited(path / "users.dat", "::", names, encoding="latin-1").reset_index(drop=True)
    return InteractionData(inter, items, users, source=str(ratings))


# --- RecBole atomic files ----------------------------------------------------------------


def _recbole_table(path: Path) -> pd.DataFrame:
    """Read an atomic file; the typed header ``name:type`` becomes plain ``name`` columns."""
    frame = read_delimited(path, "\t", header=True)
    cols = []
    for col in frame.columns:
        name, _, ftype = str(col).partition(":")
        if ftype not in ("token", "token_seq", "float", "float_seq"):
            raise DataError(
                f"{path} line 1: header field {col!r} is not 'name:type' with type token/token_seq/float/float_seq"
            )
        cols.append(name)
    frame.columns = cols
    return frame


@register_reader("recbole", options=("items_path", "columns", "item_columns"))
def read_recbole(spec: DataSpec, path: Path) -> InteractionData:
    """RecBole atomic files. ``path``: ``X.inter``, or a folder holding ``<folder>.inter`` or one ``*.inter``.

    Sequential files with ``item_id_list:token_seq`` (history) + ``item_id`` (target) are
    unrolled into one interaction per item, with the position in the sequence as timestamp.
    Item titles come from ``title``, ``movie_title`` or ``item_columns['title']``.
    """
    inter_file = _recbole_inter_file(path) if path.is_dir() else require_file(path, "recbole")
    frame = rename_columns(_recbole_table(inter_file), spec.columns, inter_file)
    if "item_id_list" in frame.columns:
        frame = _unroll_sequences(frame, inter_file)
    inter = canonical_interactions(frame, str(inter_file))
    stem = inter_file.name[: -len(".inter")]
    item_file = spec.resolve(spec.items_path) or inter_file.with_name(f"{stem}.item")
    items = users = None
    if item_file.is_file():
        it = rename_columns(_recbole_table(item_file), spec.item_columns, item_file)
        if TITLE not in it.columns and "movie_title" in it.columns:
            it = it.rename(columns={"movie_title": TITLE})
        items = canonical_items(it, str(item_file))
    elif spec.items_path is not None:
        raise DataError(f"recbole: items_path not found: {item_file}")
    user_file = inter_file.with_name(f"{stem}.user")
    if user_file.is_file():
        users = _recbole_table(user_file).reset_index(drop=True)
    return InteractionData(inter, items, users, source=str(inter_file))


def _recbole_inter_file(folder: Path) -> Path:
    """``folder/<folder>.inter``, else the folder's only ``*.inter`` file."""
    named = folder / f"{folder.name}.inter"
    if named.is_file():
        return named
    found = sorted(folder.glob("*.inter"))
    if len(found) != 1:
        raise DataError(
            f"recbole: {folder} must hold {named.name} or exactly one *.inter file; found {[p.name for p in found]}"
        )
    return found[0]


def _unroll_sequences(frame: pd.DataFrame, source: Path) -> pd.DataFrame:
    if USER_ID not in frame.columns or ITEM_ID not in frame.columns:
        raise DataError(f"{source}: a sequence file needs user_id and item_id columns; has {list(frame.columns)}")
    rows: dict[str, list] = {USER_ID: [], ITEM_ID: [], TIMESTAMP: [], "line": []}
    for line, user, hist, target in zip(frame.index, frame[USER_ID], frame["item_id_list"], frame[ITEM_ID]):
        seq = str(hist).split() + [target]
        rows[USER_ID] += [user] * len(seq)
        rows[ITEM_ID] += seq
        rows[TIMESTAMP] += list(range(len(seq)))
        rows["line"] += [line] * len(seq)
    return pd.DataFrame(rows).set_index("line")


# --- HetRec 2011 LastFM ------------------------------------------------------------------


@register_reader("hetrec-lastfm")
def read_hetrec_lastfm(spec: DataSpec, path: Path) -> InteractionData:
    """HetRec 2011 Last.fm: ``user_artists.dat`` (play counts as rating, no time) + ``artists.dat``."""
    ua = require_file(path / "user_artists.dat", "hetrec-lastfm")
    frame = read_delimited(ua, "\t", header=True)
    frame = rename_columns(frame, {USER_ID: "userID", ITEM_ID: "artistID", RATING: "weight"}, ua)
    inter = canonical_interactions(frame, str(ua))
    items = None
    if (path / "artists.dat").is_file():
        art = read_delimited(path / "artists.dat", "\t", header=True)
        art = rename_columns(art, {ITEM_ID: "id", TITLE: "name"}, path / "artists.dat")
        items = canonical_items(art, str(path / "artists.dat"))
    return InteractionData(inter, items, None, source=str(ua))


# --- Amazon reviews ----------------------------------------------------------------------


@register_reader("amazon", options=("items_path", "columns", "item_columns"))
def read_amazon(spec: DataSpec, path: Path) -> InteractionData:
    """Amazon reviews (2018/2023): CSV(.gz) or JSON(L) rows of user_id, parent_asin|asin, rating, timestamp.

    Also reads the nested ``[{user_id, reviews: [{parent_asin, rating, timestamp, product_name}]}]``
    layout; its ``product_name`` gives titles when no ``items_path`` metadata is set.
    Metadata (CSV or JSON(L)) is keyed by ``parent_asin`` (or ``asin``) and must have ``title``.
    """
    frame = read_table(path)
    titles_from_reviews = None
    if "reviews" in frame.columns and USER_ID in frame.columns:
        frame = _flatten_reviews(frame, path)
        if "product_name" in frame.columns:
            titles_from_reviews = frame[["parent_asin", "product_name"]].dropna().drop_duplicates("parent_asin")
    mapping = {ITEM_ID: _asin_column(frame, path), **spec.columns}
    frame = rename_columns(frame, {k: v for k, v in mapping.items() if v != k}, path)
    inter = canonical_interactions(frame, str(path))
    items = None
    if spec.items_path is not None:
        meta_path = require_file(spec.resolve(spec.items_path), "amazon metadata (items_path)")
        meta = read_table(meta_path)
        meta = meta.drop(columns=[c for c in meta.columns if str(c).startswith("Unnamed") or c == ""])
        meta = rename_columns(meta, {ITEM_ID: _asin_column(meta, meta_path), **spec.item_columns}, meta_path)
        items = canonical_items(meta, str(meta_path))
    elif titles_from_reviews is not None:
        items = canonical_items(
            titles_from_reviews.rename(columns={"parent_asin": ITEM_ID, "product_name": TITLE}), str(path)
        )
    return InteractionData(inter, items, None, source=str(path))


def _asin_column(frame: pd.DataFrame, source: Path) -> str:
    for col in ("parent_asin", "asin", ITEM_ID):
        if col in frame.columns:
            return col
    raise DataError(
        f"{source}: no item id column (parent_asin, asin or item_id); columns present: {list(frame.columns)}"
    )


def _flatten_reviews(frame: pd.DataFrame, source: Path) -> pd.DataFrame:
    rows, lines = [], []
    for line, user, reviews in zip(frame.index, frame[USER_ID], frame["reviews"]):
        if not isinstance(reviews, list):
            raise DataError(f"{source} record {line}: 'reviews' must be a list, got {type(reviews).__name__}")
        for review in reviews:
            rows.append({USER_ID: user, **review})
            lines.append(line)
    out = pd.DataFrame.from_records(rows)
    out.index = pd.Index(lines, name="line")
    return out


# --- generic tables ----------------------------------------------------------------------


def _read_generic(spec: DataSpec, path: Path) -> InteractionData:
    frame = rename_columns(read_table(path, sep=spec.sep), spec.columns, path)
    inter = canonical_interactions(frame, str(path))
    items = None
    if spec.items_path is not None:
        item_path = require_file(spec.resolve(spec.items_path), f"{spec.format} items_path")
        items = canonical_items(
            rename_columns(read_table(item_path, sep=spec.sep), spec.item_columns, item_path), str(item_path)
        )
    return InteractionData(inter, items, None, source=str(path))


register_reader("csv", options=("items_path", "columns", "item_columns", "sep"))(_read_generic)
register_reader("parquet", options=("items_path", "columns", "item_columns"))(_read_generic)
