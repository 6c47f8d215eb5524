"""Build, save and load LRWorld sample sets; expand them into the rows a run asks.

A sample set is a folder: ``samples.jsonl`` (one built sample per line, gold first in
``candidates``) and ``manifest.json`` (schema version, the build config, counts per
measure, measures not built with the reason, the sha256 of ``samples.jsonl``).
``expand`` turns each sample into one row per (variant, position run), each with its own
stable shuffle of the options.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from pathlib import Path

from llmrec.errors import DataError, read_utf8
from llmrec.pipelines.benchmarks.lrworld.builders import build_measures
from llmrec.pipelines.benchmarks.lrworld.builders.common import SCHEMA_VERSION
from llmrec.pipelines.benchmarks.lrworld.builders.neural import read_embeddings
from llmrec.pipelines.benchmarks.lrworld.catalog import load_catalog, pop_groups, read_descriptions
from llmrec.pipelines.benchmarks.lrworld.config import BuildConfig, LRWorldConfig
from llmrec.pipelines.common.seeding import stable_rng

log = logging.getLogger(__name__)
SAMPLES, MANIFEST = "samples.jsonl", "manifest.json"
PROFILE_FACTORS = ("memory_user_user", "neural_user_items", "entity_relation", "entity_attribute", "taxonomy",
                   "text_knowledge", "multimodal")  # the history shown is a user's profile (noisy variant)


def _resolve(path: Path | None, data_dir: Path) -> Path | None:
    """Absolute as given; relative: the working directory when it exists there (run outputs such as
    ``runs/baselines/<run>/embeddings``), else the data dir."""
    if path is None or Path(path).is_absolute() or Path(path).exists():
        return None if path is None else Path(path)
    return Path(data_dir) / path


def add_noise(samples: list[dict], seed: int) -> None:
    """Draw, once at build time, the noisy-profile replacement of each profile sample: a random
    history position and a random item shown in the same measure's histories, not in this one."""
    pools: dict[str, dict[str, str]] = {}
    for s in samples:
        for i, t in zip(s.get("history_ids") or [], s.get("history") or []):
            pools.setdefault(s["measure"], {})[i] = t
    for s in samples:
        if s["factor"] not in PROFILE_FACTORS or not s.get("history"):
            continue
        rng = stable_rng(seed, s["sample_id"], "noise")
        pool = sorted(set(pools[s["measure"]]) - set(s["history_ids"]) - set(filter(None, s["candidate_ids"])))
        if pool:
            item = rng.choice(pool)
            s["noise"] = {"position": rng.randrange(len(s["history"])), "item_id": item,
                          "text": pools[s["measure"]][item]}


def build_sample_set(build: BuildConfig, data_dir: Path, progress=None) -> dict:
    """Every source's measures: ``{"samples", "counts", "not_built"}``."""
    samples, not_built = [], {}
    for src in build.sources:
        spec = src.data if src.data.dir is not None else src.data.model_copy(update={"dir": Path(data_dir)})
        catalog = load_catalog(src.name, spec)
        emb_dir = _resolve(src.embeddings, data_dir)
        emb = read_embeddings(emb_dir) if emb_dir is not None else None
        img = _resolve(src.image_descriptions, data_dir)
        got, missing = build_measures(catalog, build, emb, read_descriptions(img) if img else None, progress)
        pops = pop_groups(catalog)
        for s in got:
            s["gold_pop"] = pops.get(s["candidate_ids"][0]) if s["field"] != "user" else None
        samples += got
        not_built.update(missing)
    add_noise(samples, build.seed)
    return {"samples": samples, "counts": dict(Counter(s["measure"] for s in samples)), "not_built": not_built}


def write_sample_set(result: dict, build: BuildConfig, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(s, ensure_ascii=False, sort_keys=True) + "\n" for s in result["samples"])
    (out / SAMPLES).write_text(body, encoding="utf-8")
    manifest = {"schema_version": SCHEMA_VERSION, "benchmark": "lrworld",
                "sha256": hashlib.sha256(body.encode()).hexdigest(), "n_samples": len(result["samples"]),
                "counts": result["counts"], "not_built": result["not_built"],
                "build": build.model_dump(mode="json")}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return out


def read_sample_set(path: Path) -> tuple[list[dict], dict]:
    """Samples and manifest of a folder from ``write_sample_set`` (checks version and checksum)."""
    path = Path(path)
    if not (path / MANIFEST).is_file() or not (path / SAMPLES).is_file():
        raise DataError(f"{path}: not an LRWorld sample set (needs {SAMPLES} and {MANIFEST}; "
                        "write one with `llmrec lrworld build`)")
    manifest = json.loads(read_utf8(path / MANIFEST))
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise DataError(f"{path / MANIFEST}: schema_version {manifest.get('schema_version')!r}, this llmrec "
                        f"reads {SCHEMA_VERSION}; rebuild with `llmrec lrworld build`")
    body = read_utf8(path / SAMPLES)
    if hashlib.sha256(body.encode()).hexdigest() != manifest.get("sha256"):
        raise DataError(f"{path / SAMPLES}: sha256 differs from the manifest (edited after the build?)")
    return [json.loads(line) for line in body.splitlines() if line.strip()], manifest


def load_samples(cfg: LRWorldConfig, data_dir: Path) -> tuple[list[dict], dict[str, str]]:
    """Built samples (from ``samples_file`` or built now) filtered by ``measures``/``per_measure``."""
    if cfg.samples_file is not None:
        samples, manifest = read_sample_set(_resolve(cfg.samples_file, data_dir))
        not_built = manifest.get("not_built", {})
    else:
        built = build_sample_set(cfg.build, data_dir)
        samples, not_built = built["samples"], built["not_built"]
    if not_built:  # expected: a source's data lacks what some measures need (`llmrec lrworld build` lists them)
        log.info("lrworld: %d measure(s) not built from these sources: %s", len(not_built),
                 "; ".join(f"{name} ({reason})" for name, reason in sorted(not_built.items())))
    if cfg.measures is not None:
        unknown = sorted(set(cfg.measures) - {s["measure"] for s in samples})
        if unknown:
            raise DataError(f"measures {unknown} have no samples; available: {sorted({s['measure'] for s in samples})}")
        samples = [s for s in samples if s["measure"] in cfg.measures]
    if cfg.per_measure is not None:
        kept, seen = [], Counter()
        for s in samples:
            seen[s["measure"]] += 1
            if seen[s["measure"]] <= cfg.per_measure:
                kept.append(s)
        samples = kept
    return samples, not_built


def labels(kind: str) -> list[str]:
    return [str(k) for k in range(1, 11)] if kind == "hit1" else ["A", "B", "C", "D"]


def shuffled(sample: dict, seed: int, run: int) -> dict:
    """Options in a per-sample stable random order: ``options``, ``gold`` (label), ``gold_pos`` (1-based)."""
    order = list(range(len(sample["candidates"])))
    stable_rng(seed, sample["sample_id"], "order", run).shuffle(order)
    labs = labels(sample["kind"])
    pos = order.index(0)
    return {"options": [sample["candidates"][k] for k in order], "gold": labs[pos], "gold_pos": pos + 1}


def _shots(sample: dict, by_measure: dict[str, list[dict]], k: int, seed: int) -> list[dict]:
    """``k`` other samples of the same measure (other users), with their shuffled options and answer."""
    pool = [o for o in by_measure[sample["measure"]] if o["sample_id"] != sample["sample_id"]
            and (o.get("user_id") is None or o.get("user_id") != sample.get("user_id"))]
    picked = random.Random(f"{seed}/{sample['sample_id']}/shots").sample(pool, min(k, len(pool)))
    return [{**{f: o[f] for f in ("history", "target", "domain", "kind", "factor", "field")}, **shuffled(o, seed, 0)}
            for o in picked]


def expand(cfg: LRWorldConfig, samples: list[dict]) -> list[dict]:
    """Rows asked in a run: variant × position run per sample (noisy only where a profile is shown)."""
    by_measure: dict[str, list[dict]] = {}
    for s in samples:
        by_measure.setdefault(s["measure"], []).append(s)
    rows = []
    for s in samples:
        for variant in cfg.variants:
            if variant == "noisy" and "noise" not in s:
                continue
            for run in range(cfg.position_runs):
                row = {**s, **shuffled(s, cfg.seed, run), "base_id": s["sample_id"], "variant": variant, "run": run,
                       "sample_id": f"{s['sample_id']}|{variant}|r{run}"}
                if variant == "noisy":
                    hist = list(s["history"])
                    hist[s["noise"]["position"]] = s["noise"]["text"]
                    row["history"] = hist
                if variant == "fewshot":
                    row["_shots"] = _shots(s, by_measure, cfg.shots, cfg.seed)
                rows.append(row)
    return rows
