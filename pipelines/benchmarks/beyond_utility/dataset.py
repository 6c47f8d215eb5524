"""Interactions → per-user leave-one-out sequences and the item table of the score contract.

History = every earlier item of the user (by time, file order on ties), target = the last
(the reference's ``sequential_data.txt``: ``[1:-1]`` history, last = target). Item ids in the
contract are integers: the raw id when every raw id is a positive integer (MovieLens, LastFM),
else 1 + the rank of the raw id in sorted order (Amazon ASINs); 0 is reserved for
hallucinated titles. ``train_freq`` counts history occurrences over ALL users (targets
excluded), as the reference's ``x[1:-1]`` count.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from llmrec.errors import DataError
from llmrec.interactions import ITEM_ID, TIMESTAMP, TITLE, USER_ID, apply_filters, load_interactions
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.benchmarks.beyond_utility.metrics import Catalog

log = logging.getLogger(__name__)
UNTITLED = "N\\A"  # the reference's title for catalog items without one (llm_metrics.py:55-58)


@dataclass
class Dataset:
    """Everything sample building, title mapping and scoring need about the data."""

    sequences: dict[str, list[str]]  # user -> raw item ids in time order (last = target)
    int_id: dict[str, int]  # raw item id -> contract id (>= 1)
    titles: dict[int, str]  # contract id -> title shown in prompts (UNTITLED when empty)
    categories: dict[int, tuple[str, ...]]
    source: str = ""
    catalog: Catalog = field(init=False)

    def __post_init__(self) -> None:
        freq: dict[int, int] = {i: 0 for i in self.titles}
        for seq in self.sequences.values():
            for raw in seq[:-1]:
                freq[self.int_id[raw]] = freq.get(self.int_id[raw], 0) + 1
        hist = [len(s) - 1 for s in self.sequences.values()]
        self.catalog = Catalog(freq, self.categories, len(self.sequences), float(np.median(hist)))

    @property
    def raw_id(self) -> dict[int, str]:
        return {v: k for k, v in self.int_id.items()}

    def items_lines(self) -> list[dict]:
        """ITEMS.jsonl of the score contract (plus readable ``raw_id`` / ``title``)."""
        raw = self.raw_id
        lines = [{"item_id": i, "train_freq": self.catalog.train_freq.get(i, 0),
                  "categories": list(self.categories.get(i, ())), "raw_id": raw.get(i), "title": self.titles[i]}
                 for i in sorted(self.titles)]
        return lines + [{"n_users": self.catalog.n_users, "history_len_median": self.catalog.history_len_median}]

    def write_items(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            for line in self.items_lines():
                fh.write(json.dumps(line) + "\n")
        return path


def _contract_ids(raw_ids: list[str]) -> dict[str, int]:
    if all(r.isdigit() and int(r) > 0 for r in raw_ids):
        return {r: int(r) for r in raw_ids}
    return {r: n for n, r in enumerate(sorted(raw_ids), 1)}


def _first_category_path(value) -> tuple[str, ...]:
    """Genres / the first category path as a tuple of strings (empty when none)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    seq = list(value)
    if seq and not isinstance(seq[0], str):  # Amazon: a list of category paths -> the first path
        seq = list(seq[0])
    return tuple(str(c) for c in seq)


def load_dataset(cfg: BeyondUtilityConfig, data_dir: Path | None) -> Dataset:
    spec = cfg.data if cfg.data.dir is not None or data_dir is None else cfg.data.model_copy(update={"dir": data_dir})
    data = load_interactions(spec)
    inter = apply_filters(data.interactions, cfg.filters, data.source)
    if inter[TIMESTAMP].isna().any():
        raise DataError(f"{data.source}: leave-one-out by time needs timestamps; this source has none")
    ordered = inter.reset_index(drop=True).sort_values([USER_ID, TIMESTAMP], kind="stable")
    sequences = {str(u): list(g[ITEM_ID].astype(str)) for u, g in ordered.groupby(USER_ID, sort=True)}
    sequences = {u: s for u, s in sequences.items() if len(s) >= 2}
    items = data.items if data.items is not None else pd.DataFrame({ITEM_ID: [], TITLE: []})
    raw_ids = sorted(set(inter[ITEM_ID].astype(str)) | set(items[ITEM_ID].astype(str)))
    int_id = _contract_ids(raw_ids)
    titles = {int_id[r]: UNTITLED for r in raw_ids}
    cats: dict[int, tuple[str, ...]] = {}
    cat_col = next((c for c in ("genres", "categories", "category", "tags") if c in items.columns), None)
    for row in items.itertuples(index=False):
        i = int_id[str(getattr(row, ITEM_ID))]
        title = getattr(row, TITLE)
        if isinstance(title, str) and title.strip():
            titles[i] = title.strip()
        if cat_col is not None:
            cats[i] = _first_category_path(getattr(row, cat_col))
    log.info("beyond_utility: %d users, %d items from %s", len(sequences), len(titles), data.source)
    return Dataset(sequences, int_id, titles, cats, data.source)
