"""The unified engagement schema and the signal flags of every dataset GISTBench knows.

Every source (the published GISTBench columns, star ratings, play counts) is mapped to
one frame with the columns in ``COLUMNS``. A dataset's *signal flags* say which of the
four engagement types exist in it; they select the verification predicate (paper §4.2)
and the rules written into the extraction prompt (closed loop, §4.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Literal

from llmrec.errors import ConfigError

# unified engagement schema (paper §3.5)
DATASET = "dataset"
USER_ID = "user_id"
OBJECT_ID = "object_id"
ENGAGEMENT_TYPE = "engagement_type"
OBJECT_TEXT = "object_text"
TIMESTAMP = "timestamp"
COLUMNS: tuple[str, ...] = (DATASET, USER_ID, OBJECT_ID, ENGAGEMENT_TYPE, OBJECT_TEXT, TIMESTAMP)

# the published GISTBench columns (HF facebook/gistbench)
INTERACTION_TYPE = "interaction_type"
INTERACTION_TIME = "interaction_time"
PUBLISHED_COLUMNS: tuple[str, ...] = (USER_ID, OBJECT_ID, OBJECT_TEXT, INTERACTION_TYPE, INTERACTION_TIME)

EXP_POS = "explicit_positive"
IMP_POS = "implicit_positive"
IMP_NEG = "implicit_negative"
EXP_NEG = "explicit_negative"
ENGAGEMENT_TYPES: tuple[str, ...] = (EXP_POS, IMP_POS, IMP_NEG, EXP_NEG)

Source = Literal["published", "stars", "plays"]
ALL = frozenset(ENGAGEMENT_TYPES)


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: its name, the noun the prompts use, its signal flags and where rows come from.

    ``source``: ``published`` reads the GISTBench columns from a file; ``stars`` maps 1–5
    ratings; ``plays`` maps play counts. ``reader``/``reader_path`` name the interaction
    data layer's format and the path under the data directory (mapped datasets only).
    """

    name: str
    object_name: str  # plural noun, e.g. "videos"
    signals: frozenset[str]
    source: Source = "published"
    reader: str | None = None
    reader_path: str | None = None

    def has(self, engagement_type: str) -> bool:
        return engagement_type in self.signals

    def with_signals(self, signals: Iterable[str]) -> "DatasetSpec":
        return DatasetSpec(self.name, self.object_name, frozenset(signals), self.source, self.reader, self.reader_path)


def _spec(name: str, noun: str, *signals: str, **kw) -> DatasetSpec:
    return DatasetSpec(name, noun, frozenset(signals), **kw)


DATASETS: MappingProxyType[str, DatasetSpec] = MappingProxyType({
    # the paper's five (flags as in the reference implementation)
    "synthetic": _spec("synthetic", "videos", EXP_POS, IMP_POS, IMP_NEG),
    "kuairec": _spec("kuairec", "videos", EXP_POS, IMP_POS, IMP_NEG),
    "mind": _spec("mind", "news articles", EXP_POS, IMP_NEG),
    "amazon_music": _spec("amazon_music", "songs", EXP_POS, IMP_POS, EXP_NEG),
    "goodreads": _spec("goodreads", "books", EXP_POS, IMP_POS, EXP_NEG),
    "yelp": _spec("yelp", "stores", EXP_POS, IMP_POS, EXP_NEG),
    # mapped from the rating data in the shared data folder
    "ml-100k": _spec("ml-100k", "movies", EXP_POS, IMP_POS, EXP_NEG, source="stars",
                     reader="movielens-100k", reader_path="ml-100k"),
    "amazon_beauty": _spec("amazon_beauty", "beauty products", EXP_POS, IMP_POS, EXP_NEG, source="stars",
                           reader="amazon", reader_path="amazon-all-beauty-2023/filtered_user_reviews.json"),
    "lastfm": _spec("lastfm", "music artists", EXP_POS, IMP_POS, IMP_NEG, source="plays",
                    reader="hetrec-lastfm", reader_path="hetrec2011-lastfm-2k"),
    # any file with the published columns; flags are detected from the types present
    "custom": _spec("custom", "items", *ENGAGEMENT_TYPES),
})

ALIASES: MappingProxyType[str, str] = MappingProxyType({
    "amazon_digital_music": "amazon_music",  # the reference's name
    "ml100k": "ml-100k",
    "movielens-100k": "ml-100k",
    "hetrec-lastfm": "lastfm",
})

# datasets whose flags are fixed (the score task accepts only these)
KNOWN_FLAGS = tuple(n for n in DATASETS if n != "custom")


def dataset_spec(name: str) -> DatasetSpec:
    """The spec of ``name`` (aliases allowed); an unknown name lists the known ones."""
    key = ALIASES.get(name, name)
    if key not in DATASETS:
        raise ConfigError(
            f"Unknown GISTBench dataset '{name}'. Available: {', '.join(DATASETS)} "
            f"(aliases: {', '.join(f'{a}={t}' for a, t in ALIASES.items())})"
        )
    return DATASETS[key]


def detect_signals(types: Iterable[str]) -> frozenset[str]:
    """Flags of a custom file: the engagement types that occur in it."""
    return frozenset(t for t in set(types) if t in ALL)
