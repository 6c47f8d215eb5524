"""A source dataset as the builders see it: items with display text and attributes, and users' histories.

The builders are pure functions over a ``Catalog``; this module is the only one that reads
files (through ``llmrec.interactions``), so unit tests build a ``Catalog`` by hand.
Attributes per source (missing ones leave their measures "not built"):

- MovieLens (100K, 1M): ``genres`` (the item's genre set, joined), ``decade`` (from the year in
  the title, else ``release_date``);
- HetRec LastFM: ``tag`` (the artist's most-used tag, only when ``user_taggedartists.dat`` is
  beside ``user_artists.dat``; the shared copy lacks it);
- Amazon: ``brand`` (``brand``/``store`` column or ``Brand`` in the ``details`` dict),
  ``description``, ``categories`` (a list path root → leaf, when the metadata has one).
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pydantic import Field

from llmrec.interactions import ITEM_ID, TIMESTAMP, USER_ID, DataSpec, load_interactions
from llmrec.pipelines.common.jsonio import Id, PredictionLine, read_predictions

_YEAR = re.compile(r"\((\d{4})\)\s*$")


@dataclass(frozen=True)
class Catalog:
    """``histories``: user → item ids, oldest first (by timestamp, else by rating/weight descending)."""

    name: str
    domain: str  # "movie", "music artist", "product": the noun used in prompts
    items: dict[str, str]  # item id -> display text
    histories: dict[str, list[str]]
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)  # field -> item id -> value
    categories: dict[str, list[str]] = field(default_factory=dict)  # item id -> category path root..leaf
    ordered: bool = True  # histories are in time order

    def popularity(self) -> dict[str, int]:
        """Interactions per item (the paper's popularity proxy)."""
        return Counter(i for h in self.histories.values() for i in h)


def pop_groups(catalog: Catalog) -> dict[str, str]:
    """``item -> "pop" | "non-pop"``: non-pop when log(1+frequency) is below the mean over items (paper A.9)."""
    freq = catalog.popularity()
    if not freq:
        return {}
    logs = {i: math.log1p(n) for i, n in freq.items()}
    mean = sum(logs.values()) / len(logs)
    return {i: ("non-pop" if v < mean else "pop") for i, v in logs.items()}


def _histories(inter: pd.DataFrame, by_time: bool) -> dict[str, list[str]]:
    key = [USER_ID, TIMESTAMP, ITEM_ID] if by_time else [USER_ID, "rating", ITEM_ID]
    asc = [True, True, True] if by_time else [True, False, True]
    inter = inter.sort_values(key, ascending=asc, kind="mergesort")
    return {u: list(g[ITEM_ID]) for u, g in inter.groupby(USER_ID, sort=True)}


def _decade(title: str, release: object) -> str | None:
    m = _YEAR.search(title or "")
    year = int(m.group(1)) if m else None
    if year is None and isinstance(release, str) and release[-4:].isdigit():
        year = int(release[-4:])
    return f"{year // 10 * 10}s" if year else None


def movielens_catalog(name: str, spec: DataSpec) -> Catalog:
    data = load_interactions(spec)
    items = data.items.set_index(ITEM_ID)
    genres, decade, text = {}, {}, {}
    for iid, row in items.iterrows():
        g = [x for x in (row.get("genres") or []) if x and x != "unknown"]
        text[iid] = f"{row['title']}, {'|'.join(g) or 'unknown genre'}"
        if g:
            genres[iid] = ", ".join(g)
        d = _decade(row["title"], row.get("release_date"))
        if d:
            decade[iid] = d
    return Catalog(name, "movie", text, _histories(data.interactions, data.has_timestamps),
                   {"genres": genres, "decade": decade}, ordered=data.has_timestamps)


def lastfm_catalog(name: str, spec: DataSpec) -> Catalog:
    data = load_interactions(spec)
    text = data.titles()
    attrs: dict[str, dict[str, str]] = {}
    folder = spec.resolve(spec.path)
    tagged, tags = folder / "user_taggedartists.dat", folder / "tags.dat"
    if tagged.is_file() and tags.is_file():
        ta = pd.read_csv(tagged, sep="\t", dtype=str)
        names = pd.read_csv(tags, sep="\t", dtype=str, encoding="latin-1").set_index("tagID")["tagValue"]
        top = ta.groupby(["artistID", "tagID"]).size().reset_index(name="n")
        top = top.sort_values(["artistID", "n", "tagID"], ascending=[True, False, True]).drop_duplicates("artistID")
        attrs["tag"] = {a: names.get(t, t) for a, t in zip(top["artistID"], top["tagID"])}
    return Catalog(name, "music artist", text, _histories(data.interactions, False), attrs, ordered=False)


def _brand(row: pd.Series) -> str | None:
    for col in ("brand", "store"):
        v = row.get(col)
        if isinstance(v, str) and v.strip():
            return v.strip()
    details = row.get("details")
    if isinstance(details, str) and details.startswith("{"):
        try:
            v = ast.literal_eval(details).get("Brand")
        except (ValueError, SyntaxError):
            return None
        return v.strip() if isinstance(v, str) and v.strip() else None
    return None


def _path(value: object) -> list[str]:
    if isinstance(value, str) and value.startswith("["):
        value = ast.literal_eval(value)
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def amazon_catalog(name: str, spec: DataSpec, max_title: int = 120) -> Catalog:
    data = load_interactions(spec)
    items = data.items.set_index(ITEM_ID) if data.items is not None else pd.DataFrame()
    text, brand, desc, cats = {}, {}, {}, {}
    for iid, row in items.iterrows():
        text[iid] = str(row["title"])[:max_title]
        if (b := _brand(row)) is not None:
            brand[iid] = b
        d = row.get("description")
        if isinstance(d, str) and len(d.strip()) > 20:
            desc[iid] = d.strip()
        if "categories" in items.columns and len(p := _path(row.get("categories"))) >= 3:
            cats[iid] = p
    attrs = {k: v for k, v in (("brand", brand), ("description", desc)) if v}
    return Catalog(name, "product", text, _histories(data.interactions, data.has_timestamps), attrs, cats,
                   ordered=data.has_timestamps)


LOADERS = {"movielens-100k": movielens_catalog, "movielens-1m": movielens_catalog,
           "hetrec-lastfm": lastfm_catalog, "amazon": amazon_catalog}


def load_catalog(name: str, spec: DataSpec) -> Catalog:
    """Read ``spec`` into a Catalog named ``name`` (the dataset part of measure names)."""
    from llmrec.errors import ConfigError

    if spec.format not in LOADERS:
        raise ConfigError(f"lrworld source '{name}': format '{spec.format}' has no catalog loader; "
                          f"supported: {sorted(LOADERS)}")
    return LOADERS[spec.format](name, spec)


class Description(PredictionLine):
    unique = ("item_id",)
    item_id: Id
    description: str = Field(pattern=r"\S")  # not blank


def read_descriptions(path: Path) -> dict[str, str]:
    """Multimodal input: JSON lines ``{"item_id": "...", "description": "..."}`` (one per item)."""
    from llmrec.errors import DataError

    if not Path(path).is_file():
        raise DataError(f"image-description file not found: {path} (JSON lines {{item_id, description}})")
    return {str(line["item_id"]): line["description"].strip()
            for line in read_predictions(path, Description, "image-description file")}
