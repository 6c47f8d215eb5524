"""The interaction data layer shared by every benchmark and by the baselines in ``models/``.

Not a benchmark (it exports no ``BENCHMARK``). Typical use::

    from llmrec.interactions import DataSpec, FilterConfig, SplitConfig, prepare
    data, split = prepare(DataSpec(format="movielens-100k", path="ml-100k"),
                          FilterConfig(user_core=5), SplitConfig(protocol="loo"))

``load_interactions`` reads any registered format into the canonical schema
(``schema.py``); ``apply_filters`` cleans; ``split_interactions`` splits.
"""

from __future__ import annotations

from llmrec.interactions.config import CandidateConfig, DataSpec, FilterConfig, SplitConfig
from llmrec.interactions.filters import apply_filters, dedup, k_core, threshold
from llmrec.interactions.readers import FORMATS, load_interactions, register_reader
from llmrec.interactions.schema import (
    INTERACTION_COLUMNS,
    ITEM_ID,
    RATING,
    TIMESTAMP,
    TITLE,
    USER_ID,
    InteractionData,
)
from llmrec.interactions.splits import (
    Split,
    leave_one_out,
    random_split,
    sample_negatives,
    split_interactions,
    temporal_split,
)


def prepare(
    spec: DataSpec, filters: FilterConfig | None = None, split: SplitConfig | None = None
) -> tuple[InteractionData, Split]:
    """Read, filter and split in one call; returns the filtered data and the split."""
    data = load_interactions(spec)
    inter = apply_filters(data.interactions, filters or FilterConfig(), data.source)
    data = InteractionData(inter, data.items, data.users, data.source, data.meta)
    return data, split_interactions(inter, split or SplitConfig(), data.source)


__all__ = [
    "CandidateConfig",
    "DataSpec",
    "FilterConfig",
    "SplitConfig",
    "FORMATS",
    "INTERACTION_COLUMNS",
    "ITEM_ID",
    "RATING",
    "TIMESTAMP",
    "TITLE",
    "USER_ID",
    "InteractionData",
    "Split",
    "apply_filters",
    "dedup",
    "k_core",
    "leave_one_out",
    "load_interactions",
    "prepare",
    "random_split",
    "register_reader",
    "sample_negatives",
    "split_interactions",
    "temporal_split",
    "threshold",
]
