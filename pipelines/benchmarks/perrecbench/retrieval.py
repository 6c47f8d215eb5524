"""BM25 top-k history retrieval, as the reference does it (rank_bm25's ``BM25Okapi``).

Documents are the encoded history items (title, author, rating lines) split on
whitespace; the query is the encoded query-item block split on single spaces (so tokens
spanning a newline, e.g. ``"Information|>\\n###"``, never match a document token). The top
k come in descending score order; ties follow ``np.argsort`` then reversal, exactly as
``BM25Okapi.get_top_n``. Duplicate history entries are kept.
"""

from __future__ import annotations

import numpy as np
from rank_bm25 import BM25Okapi


def top_k(documents: list[str], query: str, k: int) -> list[int]:
    """Indices of the ``k`` best documents for ``query`` (fewer when there are fewer documents)."""
    if not documents or k <= 0:
        return []
    bm25 = BM25Okapi([doc.split() for doc in documents])
    scores = bm25.get_scores(query.split(" "))
    return [int(i) for i in np.argsort(scores)[::-1][:k]]
