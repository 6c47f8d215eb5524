"""BM25 content baseline: the user's history titles are the document, candidate titles the query.

Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond" (2009); used
as in Jiang et al., "Beyond Utility: Evaluating LLM as Recommender" (WWW 2025), A.2/A.3
(k1 = 1.5, b = 0.75). Scoring uses the ``bm25s`` library; one document per user.
"""

from __future__ import annotations

import logging
import re
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch
from pydantic import Field

from llmrec.errors import ConfigError, MissingDependency
from llmrec.models.base import ModelConfig, Recommender, register_model
from llmrec.models.data import RecData

TOKEN = re.compile(r"\w+", re.UNICODE)


class BM25Config(ModelConfig):
    name: Literal["bm25"] = Field("bm25", description="model name")
    k1: float = Field(1.5, gt=0, description="term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="document-length normalisation")
    method: Literal["robertson", "lucene", "atire", "bm25l", "bm25+"] = Field("lucene", description="bm25s variant")


def quiet_bm25s() -> None:
    """bm25s sets its logger to DEBUG on import, so its "Building index" lines pass any level the application
    chose: let the logger inherit the application's level instead."""
    logger = logging.getLogger("bm25s")
    if logger.level == logging.DEBUG:
        logger.setLevel(logging.NOTSET)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of a title."""
    return TOKEN.findall(text.lower())


@register_model
class BM25(Recommender):
    """score(u, i) = BM25(query = title(i), document = titles of u's history)."""

    config_cls = BM25Config
    trainable = False

    def __init__(self, cfg: BM25Config, data: RecData):
        super().__init__(cfg, data)
        if not any(data.titles):
            raise ConfigError(
                "bm25 needs item titles; the data has no item table (set data.items_path or use a format with titles)"
            )
        self.item_tokens = [tokenize(t) for t in data.titles]
        self._doc_scores: sp.csr_matrix | None = None

    def fit(self, data: RecData) -> None:
        self.prepare_eval(data.train_sequences())

    def prepare_eval(self, histories: list[np.ndarray]) -> None:
        """Index one document per user; scores are computed per batch of users in ``full_scores``.

        ``bm25s`` keeps its index as a sparse (document x token) matrix of per-token BM25 scores
        and scores a query by summing the columns of the query's tokens (repeats count twice,
        unknown tokens are skipped). The same sum for every item title at once is
        ``S[users] @ Q.T`` with ``Q`` the (item x token) count matrix, so a batch of users costs
        a sparse product and memory grows with the batch, not with users x items.
        """
        try:
            import bm25s
        except ImportError as e:  # pragma: no cover - bm25s is a core dependency
            raise MissingDependency("the BM25 baseline", "bm25s", None) from e
        quiet_bm25s()
        corpus = [[tok for i in h for tok in self.item_tokens[i]] or ["<empty>"] for h in histories]
        index = bm25s.BM25(k1=self.cfg.k1, b=self.cfg.b, method=self.cfg.method)
        index.index(corpus, show_progress=False)
        packed = index.scores
        n_vocab = len(packed["indptr"]) - 1
        self._doc_scores = sp.csc_matrix(
            (packed["data"], packed["indices"], packed["indptr"]), shape=(packed["num_docs"], n_vocab)
        ).tocsr()
        rows, cols = [], []
        for item, toks in enumerate(self.item_tokens):
            if item == 0:
                continue
            ids = [t for t in index.get_tokens_ids(toks) if t < n_vocab]
            rows.extend([item] * len(ids))
            cols.extend(ids)
        query = sp.csr_matrix(
            (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(self.n_items, n_vocab)
        )  # duplicates are summed: a repeated title token counts twice, as in bm25s
        self._query_t = query.T.tocsc()
        nonoccurrence = getattr(index, "nonoccurrence_array", None)  # bm25l / bm25+ only
        self._offset = (
            np.asarray(query @ nonoccurrence, dtype=np.float32).ravel()
            if nonoccurrence is not None
            else np.zeros(self.n_items, dtype=np.float32)
        )

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        if self._doc_scores is None:
            raise RuntimeError("BM25.prepare_eval must run before scoring")
        idx = users.cpu().numpy()
        dense = (self._doc_scores[idx] @ self._query_t).toarray().astype(np.float32, copy=False)
        return torch.from_numpy(dense + self._offset).to(users.device)
