"""`llmrec perrecbench export-sft`: supervised fine-tuning data (paper §5) from groups disjoint
from the evaluation.

The evaluation groups are rebuilt from the same benchmark config (test and held-out
groups). Training groups are then built by the same group builder from the ratings of
*other* query items and *other* users: no training group shares its query item or any of
its users with an evaluation group. Each training group becomes samples exactly as the
evaluation builds them, each prompt slot is rendered by the evaluation's own
``slot_requests`` (same templates, system message, user blocks, BM25 history), and the gold
answer is the target:

- point: ``{"predicted_rating": r}`` per user (r the user's rating of the query item);
- pair: ``[User A]`` / ``[User B]`` for every ordered pair of users (higher relative rating wins);
- list: ``{"predicted_ranking": [...]}`` (users by relative rating, highest first).

Output (``OUT``): ``point/``, ``pair/``, ``list/`` and ``mixed/`` (all three, shuffled), each
with ``train.jsonl`` and ``valid.jsonl`` (split by query item); every line is
``{"messages": [system, user], "completion": gold, "format", "group_id", "level",
"item_id", "user_ids", "slot"}``; ``manifest.json`` records the evaluation items and users
the training data avoids, and the counts.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.benchmarks.perrecbench import samples as psamples
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.groups import _group, build_groups, candidate_groups, prepare
from llmrec.pipelines.benchmarks.perrecbench.metrics import ordering_from_values
from llmrec.pipelines.benchmarks.perrecbench.ranking import pair_key
from llmrec.pipelines.benchmarks.perrecbench.stages import slot_requests
from llmrec.pipelines.common.seeding import stable_rng

log = logging.getLogger(__name__)
FORMATS = ("point", "pair", "list")


def train_groups(prepared: pd.DataFrame, eval_groups: list[dict], cfg: PerRecBenchConfig,
                 per_level: int, disjoint_users: bool = True) -> list[dict]:
    """Groups (split "sft") whose query items and users appear in no evaluation group."""
    g = cfg.groups
    eval_items = {grp["item_id"] for grp in eval_groups}
    eval_users = {u["user_id"] for grp in eval_groups for u in grp["users"]}
    keep = ~prepared["item_id"].isin(eval_items)
    if disjoint_users:
        keep &= ~prepared["user_id"].isin(eval_users)
    size = max(g.sizes[lv] for lv in cfg.levels)
    cands = candidate_groups(prepared[keep], g, size, "sft")
    items = sorted(cands)
    stable_rng(g.seed, "perrecbench-sft-items").shuffle(items)
    if not items:
        raise DataError("perrecbench export-sft: no query item outside the evaluation groups has a valid group; "
                        "lower benchmark.groups.groups_per_level or relax the group settings")
    items = items[:per_level]
    out = []
    for lv in cfg.levels:
        for item_id in items:
            rows = stable_rng(g.seed, "perrecbench-sft-subset", lv, item_id).sample(cands[item_id]["rows"],
                                                                                    g.sizes[lv])
            out.append(_group(prepared, item_id, cands[item_id], lv, "sft", rows))
    return out


def _rating(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def slot_targets(sample: dict) -> list[tuple[str, str]]:
    """(slot tag, gold answer) for every prompt slot of a sample."""
    mode, rel, n = sample["mode"], sample["relative_ratings"], sample["size"]
    if mode == "point":
        return [(f"u{i}", json.dumps({"predicted_rating": _rating(sample["ratings"][i])})) for i in range(n)]
    if mode == "list":
        return [("list", json.dumps({"predicted_ranking": ordering_from_values(rel)}))]
    return [(pair_key(a, b), "[User A]" if rel[a] > rel[b] else "[User B]")
            for a in range(n) for b in range(n) if a != b]


def sample_records(cfg: PerRecBenchConfig, sample: dict) -> list[dict]:
    out = []
    for tag, gold in slot_targets(sample):
        msgs = slot_requests(cfg, sample, tag)[0].messages
        out.append({"messages": [m.model_dump() for m in msgs], "completion": gold, "format": sample["mode"],
                    "group_id": sample["group_id"], "level": sample["level"], "item_id": sample["item_id"],
                    "user_ids": sample["user_ids"], "slot": tag})
    return out


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def export_sft(cfg: PerRecBenchConfig, data_dir: Path | None, out_dir: Path, per_level: int = 50,
               valid_fraction: float = 0.1, disjoint_users: bool = True) -> dict:
    """Write the per-format and mixed training sets; returns the manifest."""
    if cfg.prompt.profile:
        raise ConfigError("perrecbench export-sft renders prompts without a model, so it cannot write LLM user "
                          "profiles: set benchmark.prompt.profile: false (in the evaluation config too)")
    if not 0 <= valid_fraction < 1:
        raise ConfigError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
    cfg = cfg.model_copy(update={"limit": None, "modes": list(FORMATS)})
    interactions, items = psamples.load_frames(cfg, data_dir)
    prepared = prepare(interactions, cfg.groups)
    eval_groups = build_groups(interactions, cfg.groups, cfg.levels, prepared)
    groups = train_groups(prepared, eval_groups, cfg, per_level, disjoint_users)
    samples = psamples.samples_from_groups(cfg, prepared, eval_groups + groups, items, data_dir, split="sft")
    item_ids = sorted({g["item_id"] for g in groups})
    stable_rng(cfg.groups.seed, "perrecbench-sft-valid").shuffle(item_ids)
    valid_items = set(item_ids[: int(round(valid_fraction * len(item_ids)))])
    by_split: dict[tuple[str, str], list[dict]] = {}
    for s in samples:
        split = "valid" if s["item_id"] in valid_items else "train"
        for r in sample_records(cfg, s):
            for fmt in (r["format"], "mixed"):
                by_split.setdefault((fmt, split), []).append(r)
    out_dir = Path(out_dir)
    counts = {}
    for (fmt, split), rows in sorted(by_split.items()):
        if fmt == "mixed":
            stable_rng(cfg.groups.seed, "perrecbench-sft-mixed", split).shuffle(rows)
        _write(out_dir / fmt / f"{split}.jsonl", rows)
        counts[f"{fmt}/{split}"] = len(rows)
    manifest = {
        "benchmark": cfg.model_dump(mode="json", exclude={"limit"}),
        "eval_groups": sorted(g["group_id"] for g in eval_groups),
        "eval_items": sorted({g["item_id"] for g in eval_groups}),
        "eval_users": sorted({u["user_id"] for g in eval_groups for u in g["users"]}),
        "train_items": sorted(set(item_ids) - valid_items), "valid_items": sorted(valid_items),
        "train_users": sorted({u["user_id"] for g in groups for u in g["users"]}),
        "disjoint_users": disjoint_users, "counts": counts,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    log.info("perrecbench export-sft: %s in %s", counts, out_dir)
    return manifest
