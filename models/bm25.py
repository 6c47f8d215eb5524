"""BM25 content baseline: the user's history titles are the document, candidate titles the query.

Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond" (2009); used
as in Jiang et al., "Beyond Utility: Evaluating LLM as Recommender" (WWW 2025), A.2/A.3
(k1 = 1.5, b = 0.75). Scoring uses the ``bm25s`` library; one document per user.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from llmrec.errors import ConfigError, MissingDependency
from models.base import ModelConfig, Recommender, register_model
from models.data import RecData

TOKEN = re.compile(r"\w+", re.UNICODE)


class BM25Config(ModelConfig):
    name: Literal["bm25"] = Field("bm25", description="model name")
    k1: float = Field(1.5, gt=0, description="term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="document-length normalisation")
    method: Literal["robertson", "lucene", "atire", "bm25l", "bm25+"] = Field("lucene", description="bm25s variant")


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
        self._scores: torch.Tensor | None = None

    def fit(self, data: RecData) -> None:
        self.prepare_eval(data.train_sequences())

    def prepare_eval(self, histories: list[np.ndarray]) -> None:
        """Index one document per user and score every item title against all of them."""
        try:
            import bm25s
        except ImportError as e:  # pragma: no cover - bm25s is a core dependency
            raise MissingDependency("the BM25 baseline", "bm25s", "core") from e
        corpus = [[tok for i in h for tok in self.item_tokens[i]] or ["<empty>"] for h in histories]
        index = bm25s.BM25(k1=self.cfg.k1, b=self.cfg.b, method=self.cfg.method)
        index.index(corpus, show_progress=False)
        scores = np.zeros((len(histories), self.n_items), dtype=np.float32)
        cache: dict[tuple[str, ...], np.ndarray] = {}
        for item, toks in enumerate(self.item_tokens):
            if item == 0 or not toks:
                continue
            key = tuple(toks)
            if key not in cache:
                cache[key] = index.get_scores(list(toks))
            scores[:, item] = cache[key]
        self._scores = torch.from_numpy(scores)

    def full_scores(self, users, seq, seq_len) -> torch.Tensor:
        if self._scores is None:
            raise RuntimeError("BM25.prepare_eval must run before scoring")
        return self._scores[users.cpu()].to(users.device)
