"""Sources → the unified engagement schema (``schema.COLUMNS``).

* Published GISTBench columns (``user_id, object_id, object_text, interaction_type,
  interaction_time``) from CSV, parquet, JSON or JSONL: taken as they are.
* Star ratings (MovieLens-100K, Amazon All_Beauty), as the paper maps Goodreads and
  Amazon Music: 5 → explicit_positive, 3–4 → implicit_positive, 1–2 → explicit_negative.
  Half stars fall to the lower band (4.5 → implicit_positive, 2.5 → explicit_negative).
* Play counts (HetRec LastFM), per user: the percentile rank of an artist's plays among
  that user's artists (ties averaged) above ``high`` → explicit_positive, at or below
  ``low`` → implicit_negative, else implicit_positive. LastFM has no timestamps, so each
  user's rows are ordered by plays (most played first) and that order stands in for time.

Rating data is read by the interaction data layer (``llmrec.interactions``); this
module only maps its frames.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.gistbench import schema as S

log = logging.getLogger(__name__)

TEXT_COLUMNS = ("title", "genres")


def parse_timestamps(values: pd.Series) -> pd.Series:
    """Numbers as numbers (never compared as strings); date strings as epoch seconds; else NaN."""
    text = values.astype("string").str.strip()
    out = pd.to_numeric(text, errors="coerce").astype("float64")
    rest = out.isna() & text.notna() & (text != "")
    if bool(rest.any()):
        dates = pd.to_datetime(text[rest], errors="coerce", utc=True, format="mixed")
        out[rest] = (dates - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return out


def _read_table(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False)
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise DataError(f"{path}: expected a JSON list of engagement records, got {type(data).__name__}")
            return pd.DataFrame.from_records(data)
    except (ValueError, OSError) as e:
        raise DataError(f"{path}: could not read engagement data: {e}") from e
    raise DataError(f"{path}: unsupported file type '{suffix}'. Allowed: .csv, .parquet, .json, .jsonl")


def _first_bad(mask: pd.Series, path: Path, what: str, values: pd.Series) -> None:
    if bool(mask.any()):
        pos = int(np.flatnonzero(mask.to_numpy())[0])
        raise DataError(f"{path}: record {pos}: {what} (got {values.iloc[pos]!r}); {int(mask.sum())} bad record(s)")


def load_published(path: str | Path, dataset: str) -> pd.DataFrame:
    """The published GISTBench columns → unified frame (``interaction_time`` may be absent)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(
            f"engagement file not found: {path}. The published data is the HF dataset facebook/gistbench; "
            f"save its train split as parquet/CSV with columns {', '.join(S.PUBLISHED_COLUMNS)} and set benchmark.path"
        )
    raw = _read_table(path)
    missing = [c for c in S.PUBLISHED_COLUMNS[:4] if c not in raw.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; columns present: {list(raw.columns)}")
    for col in (S.USER_ID, S.OBJECT_ID):
        _first_bad(raw[col].isna() | (raw[col].astype(str).str.strip() == ""), path, f"empty {col}", raw[col])
    types = raw[S.INTERACTION_TYPE].astype(str).str.strip()
    _first_bad(~types.isin(S.ENGAGEMENT_TYPES), path,
               f"interaction_type not one of {', '.join(S.ENGAGEMENT_TYPES)}", raw[S.INTERACTION_TYPE])
    times = raw[S.INTERACTION_TIME] if S.INTERACTION_TIME in raw.columns else pd.Series([None] * len(raw))
    out = pd.DataFrame({
        S.DATASET: dataset,
        S.USER_ID: raw[S.USER_ID].astype(str).str.strip(),
        S.OBJECT_ID: raw[S.OBJECT_ID].astype(str).str.strip(),
        S.ENGAGEMENT_TYPE: types,
        S.OBJECT_TEXT: raw[S.OBJECT_TEXT].fillna("").astype(str),
        S.TIMESTAMP: parse_timestamps(pd.Series(times.to_numpy(), dtype=object)).to_numpy(),
    })
    log.info("%s: %d engagements of %d users", path, len(out), out[S.USER_ID].nunique())
    return out


def _cell(v) -> str:
    if isinstance(v, (list, tuple, np.ndarray)):
        return ", ".join(str(x) for x in v)
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return str(v).strip()


def item_texts(items: pd.DataFrame | None, columns: tuple[str, ...] = TEXT_COLUMNS) -> dict[str, str]:
    """``item_id → "title | genre, genre"`` from whichever of ``columns`` the item table has."""
    if items is None or items.empty:
        return {}
    parts = [items[c].map(_cell) for c in columns if c in items.columns]
    joined = [" | ".join(p for p in cells if p) for cells in zip(*parts)] if parts else [""] * len(items)
    return dict(zip(items["item_id"].astype(str), joined))


def _frame(dataset: str, inter: pd.DataFrame, types: pd.Series, texts: dict[str, str]) -> pd.DataFrame:
    items = inter["item_id"].astype(str)
    ts = inter["timestamp"] if "timestamp" in inter.columns else pd.Series(np.nan, index=inter.index)
    return pd.DataFrame({
        S.DATASET: dataset,
        S.USER_ID: inter["user_id"].astype(str).to_numpy(),
        S.OBJECT_ID: items.to_numpy(),
        S.ENGAGEMENT_TYPE: types.to_numpy(),
        S.OBJECT_TEXT: [texts.get(i) or f"item {i}" for i in items],
        S.TIMESTAMP: pd.to_numeric(ts, errors="coerce").astype("float64").to_numpy(),
    })


def star_type(rating: float) -> str:
    """5 → explicit_positive, [3, 5) → implicit_positive, below 3 → explicit_negative."""
    if rating >= 5:
        return S.EXP_POS
    return S.IMP_POS if rating >= 3 else S.EXP_NEG


def map_star_ratings(interactions: pd.DataFrame, items: pd.DataFrame | None, dataset: str) -> pd.DataFrame:
    """Interaction-layer frames (``user_id, item_id, rating, timestamp`` + items) → unified frame."""
    ratings = pd.to_numeric(interactions["rating"], errors="coerce")
    if bool(ratings.isna().any()):
        raise DataError(f"{dataset}: {int(ratings.isna().sum())} rating(s) are not numbers")
    return _frame(dataset, interactions, ratings.map(star_type), item_texts(items))


def map_play_counts(interactions: pd.DataFrame, items: pd.DataFrame | None, dataset: str,
                    low: float = 0.2, high: float = 0.8, count_column: str = "rating") -> pd.DataFrame:
    """Play counts → engagement types by each user's percentile ranks (module docstring)."""
    plays = pd.to_numeric(interactions[count_column], errors="coerce")
    if bool(plays.isna().any()):
        raise DataError(f"{dataset}: {int(plays.isna().sum())} play count(s) are not numbers")
    inter = interactions.assign(_plays=plays)
    pct = inter.groupby("user_id")["_plays"].rank(method="average", pct=True)
    types = pd.Series(np.where(pct > high, S.EXP_POS, np.where(pct <= low, S.IMP_NEG, S.IMP_POS)), index=inter.index)
    inter = inter.assign(_type=types, _item=inter["item_id"].astype(str))
    inter = inter.sort_values(["user_id", "_plays", "_item"], ascending=[True, False, True], kind="stable")
    return _frame(dataset, inter, inter["_type"], item_texts(items))


def load_mapped(spec: S.DatasetSpec, data_dir: Path, play_quantiles: tuple[float, float]) -> pd.DataFrame:
    """Read a rating dataset through the interaction data layer, then map it."""
    try:
        from llmrec.interactions import load_interactions
        from llmrec.interactions.config import DataSpec
    except ImportError as e:
        raise DataError(
            f"dataset '{spec.name}' is read by the interaction data layer (llmrec.interactions), "
            f"which is not available here: {e}"
        ) from e
    data = load_interactions(DataSpec(format=spec.reader, path=Path(spec.reader_path), dir=data_dir))
    if spec.source == "plays":
        return map_play_counts(data.interactions, data.items, spec.name, *play_quantiles)
    return map_star_ratings(data.interactions, data.items, spec.name)
