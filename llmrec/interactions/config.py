"""Configs of the interaction data layer: where data comes from, how it is filtered and split.

Relative paths are resolved against the data directory (``data.dir``, else
``$LLMREC_DATA_DIR`` through ``llmrec.settings.env_data_dir()``, else the working directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from llmrec.config import StrictModel
from llmrec.settings import env_data_dir


class DataSpec(StrictModel):
    """Which files to read and in which format (see ``readers.FORMATS``)."""

    format: str = Field(
        description="reader name: movielens-100k, movielens-1m, recbole, hetrec-lastfm, amazon, csv, parquet"
    )
    path: Path = Field(description="file or folder of the interactions; relative paths resolve against the data dir")
    dir: Path | None = Field(None, description="data directory for relative paths; else $LLMREC_DATA_DIR, else the cwd")
    items_path: Path | None = Field(None, description="item metadata file, when not at the format's usual place")
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="csv/parquet/amazon: canonical column -> source column (user_id, item_id, rating, timestamp)",
    )
    item_columns: dict[str, str] = Field(
        default_factory=dict, description="canonical item column -> source column (item_id, title, ...)"
    )
    sep: str | None = Field(None, description="csv: field separator (default ',')")
    missing_items: Literal["error", "drop", "ignore"] = Field(
        "error", description="interactions whose item is not in the item table: fail, drop them, or keep them"
    )

    def catalogue(self) -> str:
        """The catalogue's name across benchmarks, ``<format>:<folder>`` (``movielens-100k:ml-100k``): the reader
        and the data folder (a relative path's first part; an absolute one's folder), whatever file in it is read
        — so that a memorization probe and a recommendation run on the same data name it alike."""
        path = Path(self.path)
        folder = path.parts[0] if path.parts and not path.is_absolute() else (path.parent.name if path.suffix
                                                                               else path.name)
        return f"{self.format}:{folder}"

    def resolve(self, path: Path | None) -> Path | None:
        """Resolve ``path`` against ``dir`` / ``$LLMREC_DATA_DIR`` / the working directory."""
        if path is None:
            return None
        path = Path(path).expanduser()
        if path.is_absolute():
            return path
        base = self.dir or env_data_dir() or Path.cwd()
        return Path(base).expanduser() / path


class FilterConfig(StrictModel):
    """Cleaning applied after reading, in this order: dedup, implicit threshold, k-core."""

    dedup: Literal["keep", "first", "last", "mean", "error"] = Field(
        "last",
        description="repeated (user, item) pairs: keep all, keep the first/last by time, average ratings, or fail",
    )
    min_rating: float | None = Field(None, description="implicit feedback: drop interactions rated below this")
    binarize: bool = Field(False, description="after min_rating, set every kept rating to 1.0")
    user_core: int = Field(0, ge=0, description="k-core: every user keeps at least this many interactions (0 = off)")
    item_core: int = Field(0, ge=0, description="k-core: every item keeps at least this many interactions (0 = off)")


class CandidateConfig(StrictModel):
    """Which items each evaluated user is ranked over."""

    mode: Literal["full", "sampled"] = Field(
        "full", description="full: the whole catalogue; sampled: positives + N negatives"
    )
    num_negatives: int = Field(
        99, ge=1, description="sampled mode: negatives per user, drawn from items the user never touched"
    )
    seed: int = Field(2020, description="seed of the negative sampler (validation and test draw independent "
                      "streams from it)")
    sampler: Literal["uniform", "popularity"] = Field(
        "uniform", description="sampled mode: negatives drawn uniformly from the train catalogue, or in proportion "
        "to their train popularity (harder negatives)")


class SplitConfig(StrictModel):
    """How interactions are split into train / valid / test."""

    protocol: Literal["loo", "random", "temporal"] = Field(
        "random",
        description="loo: per user the last item is test and the one before valid (by time); "
        "random: RecBole's RS split of each user's interactions; temporal: global time cut",
    )
    ratios: tuple[float, float, float] = Field(
        (0.8, 0.1, 0.1), description="random/temporal: train, valid, test shares"
    )
    group_by_user: bool = Field(True, description="random: split each user's interactions (RecBole group_by=user)")
    seed: int = Field(2020, description="random: seed of the shuffle")
    candidates: CandidateConfig = Field(default_factory=CandidateConfig)

    @model_validator(mode="after")
    def _ratios(self) -> "SplitConfig":
        if any(r < 0 for r in self.ratios) or abs(sum(self.ratios) - 1.0) > 1e-6 or self.ratios[0] <= 0:
            raise ValueError(f"ratios must be non-negative, with train > 0, and sum to 1; got {list(self.ratios)}")
        return self
