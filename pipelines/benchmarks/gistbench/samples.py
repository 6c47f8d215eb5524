"""Data → samples: one sample per (user, chunk size), carrying everything its stages need.

Render-only inputs start with ``_`` (the history chunks, the global IS pool, the category
list); the runner drops them before a sample is stored.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.gistbench import prompts, taxonomy
from llmrec.pipelines.benchmarks.gistbench import schema as S
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.benchmarks.gistbench.history import chunk_history, select_users, user_histories
from llmrec.pipelines.benchmarks.gistbench.mappers import load_mapped, load_published
from llmrec.pipelines.benchmarks.gistbench.specificity import build_pool

log = logging.getLogger(__name__)


def resolve_path(path: Path, data_dir: Path | None) -> Path:
    """Absolute as given; relative: under the data directory if it exists there, else the working directory."""
    path = Path(path).expanduser()
    if path.is_absolute() or data_dir is None:
        return path
    return data_dir / path if (data_dir / path).exists() else path


def load_engagements(cfg: GistbenchConfig, spec: S.DatasetSpec, data_dir: Path) -> pd.DataFrame:
    if spec.source == "published":
        if cfg.path is None:
            raise DataError(
                f"dataset '{spec.name}' is read from a file with the published GISTBench columns; set benchmark.path "
                f"(e.g. gistbench/gistbench/assets/mock_dataset.json for the 3-user mock set)"
            )
        frame = load_published(resolve_path(cfg.path, data_dir), spec.name)
    else:
        frame = load_mapped(spec, data_dir, cfg.play_quantiles)
    if frame.empty:
        raise DataError(f"dataset '{spec.name}': no engagements")
    return frame


def all_objects(frame: pd.DataFrame) -> dict[str, str]:
    """``object_id → object_text`` over every user (the first text seen, in object-id order)."""
    firsts = frame.sort_values(S.OBJECT_ID, kind="stable").drop_duplicates(S.OBJECT_ID)
    return dict(zip(firsts[S.OBJECT_ID], firsts[S.OBJECT_TEXT]))


def _users(cfg: GistbenchConfig, frame: pd.DataFrame) -> list[str]:
    present = set(frame[S.USER_ID])
    if cfg.user_ids is None:
        return select_users(present, cfg.users)
    unknown = [u for u in cfg.user_ids if u not in present]
    if unknown:
        raise DataError(f"benchmark.user_ids: {len(unknown)} user(s) not in the data, e.g. {unknown[:5]}")
    return list(dict.fromkeys(cfg.user_ids))


def taxonomy_ref(cfg: GistbenchConfig, categories: list[list], tax_path: Path) -> dict:
    """What stages and aggregation need to find the shared category mapping (JSON-able)."""
    t = cfg.taxonomy
    if t.mapper == "none":
        return {"mapper": "none", "cache_path": None, "namespace": "", "taxonomy_path": None, "embedding_model": None}
    model = ""
    if t.mapper == "embedding":
        model = taxonomy.EmbeddingMapper(categories, t.embedding_model).identity()
    cache = t.cache_path or taxonomy.default_cache_path()
    return {"mapper": t.mapper, "cache_path": str(cache) if (t.cache or t.mapper == "embedding") else None,
            "namespace": taxonomy.namespace(t.mapper, categories, model), "taxonomy_path": str(tax_path),
            "embedding_model": str(t.embedding_model) if t.embedding_model else None}


def shared_taxonomy(cfg: GistbenchConfig, data_dir: Path) -> tuple[list[list], dict]:
    """The category list and the ``taxonomy_ref`` of this config."""
    categories, tax_path = [], None
    if cfg.taxonomy.mapper != "none":
        tax_path = resolve_path(cfg.taxonomy.path or taxonomy.BUNDLED, data_dir)
        categories = taxonomy.load_categories(tax_path)
    return categories, taxonomy_ref(cfg, categories, tax_path)


def assets(cfg: GistbenchConfig, data_dir: Path) -> dict:
    """What every sample's stages share, read here on the driver (workers open no file): the
    extraction template's text and the shared taxonomy cache's mappings for this run's namespace
    (``taxonomy_known``: the stages skip those names; new ones are written back at aggregation)."""
    _, ref = shared_taxonomy(cfg, data_dir)
    known = taxonomy.TaxonomyCache(ref["cache_path"], ref["namespace"]).all() if ref["cache_path"] else {}
    if known:
        log.info("gistbench: %d interest mappings reused from %s", len(known), ref["cache_path"])
    return {"extraction_template": prompts.extraction_template(cfg), "taxonomy_known": known}


def build_samples(cfg: GistbenchConfig, data_dir: Path) -> list[dict]:
    spec = S.dataset_spec(cfg.dataset)
    frame = load_engagements(cfg, spec, data_dir)
    if spec.name == "custom":
        spec = spec.with_signals(S.detect_signals(frame[S.ENGAGEMENT_TYPE]))
    users = _users(cfg, frame)
    histories = user_histories(frame, users, cfg.extraction.max_history)
    needs_pool = cfg.judge.enabled and cfg.specificity.enabled
    pool = build_pool(all_objects(frame), cfg.specificity.pool_size, cfg.specificity.seed) if needs_pool else []
    categories, ref = shared_taxonomy(cfg, data_dir)
    many = len(cfg.extraction.chunk_sizes) > 1
    out = []
    for user in users:
        for size in cfg.extraction.chunk_sizes:
            out.append({
                "sample_id": f"{spec.name}/{user}" + (f"/uih{size}" if many else ""),
                "dataset": spec.name, "user_id": user, "chunk_size": size, "model_label": cfg.model_label,
                "signals": sorted(spec.signals), "object_name": spec.object_name,
                "n_engagements": len(histories[user]), "taxonomy_ref": ref, "data_dir": str(data_dir),
                "_chunks": chunk_history(histories[user], size), "_pool": pool,
                "_categories": categories if cfg.taxonomy.mapper == "llm" else [],
            })
    log.info("gistbench %s: %d users, %d samples, pool %d, %d categories", spec.name, len(users), len(out),
             len(pool), len(categories))
    return out[: cfg.limit] if cfg.limit else out
