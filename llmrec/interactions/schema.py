"""The canonical interaction schema every reader produces.

Interactions: one row per (user, item) event with the columns in ``INTERACTION_COLUMNS``:

- ``user_id`` / ``item_id``: strings (the raw ids of the source, never re-encoded);
- ``rating``: float64, never NaN (an implicit source stores its weight or 1.0);
- ``timestamp``: nullable ``Int64`` (seconds or milliseconds, as the source has them;
  ``<NA>`` when the source has no time, e.g. HetRec LastFM).

Items: ``item_id`` (string, unique) and ``title`` (string, may be empty), then any
metadata columns the source has (``genres``, ``url``, ``price`` ...). Users are optional
and keyed by ``user_id``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from llmrec.errors import DataError

USER_ID = "user_id"
ITEM_ID = "item_id"
RATING = "rating"
TIMESTAMP = "timestamp"
TITLE = "title"

INTERACTION_COLUMNS: tuple[str, ...] = (USER_ID, ITEM_ID, RATING, TIMESTAMP)
ITEM_COLUMNS: tuple[str, ...] = (ITEM_ID, TITLE)


@dataclass(frozen=True)
class InteractionData:
    """What every reader returns: canonical interactions plus optional item/user tables."""

    interactions: pd.DataFrame
    items: pd.DataFrame | None = None
    users: pd.DataFrame | None = None
    source: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def has_timestamps(self) -> bool:
        """True when every interaction has a timestamp."""
        return bool(len(self.interactions)) and not self.interactions[TIMESTAMP].isna().any()

    def titles(self) -> dict[str, str]:
        """``item_id -> title`` (empty when the source has no item table)."""
        if self.items is None:
            return {}
        return dict(zip(self.items[ITEM_ID], self.items[TITLE].fillna("")))


def canonical_interactions(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check and cast ``df`` to the canonical interaction schema.

    The frame's index is the 1-based line (or row) of ``source`` each record came from;
    readers set it so a ``DataError`` can name the file and the first bad line.
    Missing ``rating`` becomes 1.0 (implicit), missing ``timestamp`` becomes ``<NA>``.
    """
    missing = [c for c in (USER_ID, ITEM_ID) if c not in df.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {missing}; columns present: {list(df.columns)}")
    out = pd.DataFrame(index=df.index)
    for col in (USER_ID, ITEM_ID):
        values = df[col]
        bad = values.isna() | (values.astype(str).str.strip() == "")
        _raise_first(bad, source, f"empty {col}", values)
        out[col] = values.astype(str).str.strip()
    if RATING in df.columns:
        rating = pd.to_numeric(df[RATING], errors="coerce").astype("float64")
        _raise_first(rating.isna(), source, "NaN or non-numeric rating", df[RATING])
        out[RATING] = rating
    else:
        out[RATING] = 1.0
    if TIMESTAMP in df.columns:
        raw = df[TIMESTAMP]
        ts = pd.to_numeric(raw, errors="coerce")
        given = raw.notna() & (raw.astype(str).str.strip() != "")
        _raise_first(given & ts.isna(), source, "non-numeric timestamp", raw)
        out[TIMESTAMP] = ts.round().astype("Int64")
    else:
        out[TIMESTAMP] = pd.array([pd.NA] * len(df), dtype="Int64")
    return out.reset_index(drop=True)


def canonical_items(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check an item table (index = source line): ``item_id`` non-empty and unique; ``title`` a string."""
    if ITEM_ID not in df.columns:
        raise DataError(f"{source}: missing column 'item_id'; columns present: {list(df.columns)}")
    df = df.copy()
    ids = df[ITEM_ID]
    _raise_first(ids.isna() | (ids.astype(str).str.strip() == ""), source, "empty item_id", ids)
    df[ITEM_ID] = ids.astype(str).str.strip()
    _raise_first(df[ITEM_ID].duplicated(), source, "duplicate item_id", df[ITEM_ID])
    df[TITLE] = df[TITLE].fillna("").astype(str) if TITLE in df.columns else ""
    rest = [c for c in df.columns if c not in ITEM_COLUMNS]
    return df[[ITEM_ID, TITLE, *rest]].reset_index(drop=True)


def _raise_first(bad: pd.Series, source: str, what: str, values: pd.Series) -> None:
    if bool(bad.any()):
        pos = int(bad.to_numpy().nonzero()[0][0])
        raise DataError(
            f"{source} line {bad.index[pos]}: {what} (got {values.iloc[pos]!r}); {int(bad.sum())} bad row(s) in all"
        )


def check_item_coverage(data: InteractionData, policy: str) -> InteractionData:
    """Interactions whose item is missing from the item table: ``error`` | ``drop`` | ``ignore``."""
    if data.items is None or policy == "ignore":
        return data
    known = set(data.items[ITEM_ID])
    unknown = ~data.interactions[ITEM_ID].isin(known)
    if not bool(unknown.any()):
        return data
    ids = data.interactions.loc[unknown, ITEM_ID].unique()
    if policy == "error":
        raise DataError(
            f"{data.source}: {len(ids)} item id(s) in the interactions are not in the item table "
            f"(first: {list(ids[:5])}). Set data.missing_items: drop to drop those interactions."
        )
    inter = data.interactions.loc[~unknown].reset_index(drop=True)
    return InteractionData(inter, data.items, data.users, data.source, data.meta)
