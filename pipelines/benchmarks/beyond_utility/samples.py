"""Dataset → samples: one per (sampled user, prompt strategy, shown history length, candidate order).

Ranking candidates = the target + ``num_negatives`` items the user never touched, drawn with a
per-user seed (a user's candidates do not depend on which other users are sampled), then
shuffled with a stable per-user seed, so every setting, LLM and baseline sees the same order;
``target_first`` keeps the target in front (the reference's ``cand_shuffle=False`` control).
Re-ranking candidates come from ``pool_path`` (the target is not added); their base set (MostPop of
serendipity, item coverage, Jaccard) stays the ranking task's target + negatives, as the reference.
Rendering material lives in ``_``-fields (dropped before storing).
"""

from __future__ import annotations

import json
from pathlib import Path

from llmrec.errors import DataError, read_utf8
from llmrec.pipelines.benchmarks.beyond_utility import prompts
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.benchmarks.beyond_utility.dataset import Dataset
from llmrec.pipelines.benchmarks.beyond_utility.users import read_values, sample_users
from llmrec.pipelines.common.seeding import stable_rng


def negatives(ds: Dataset, user: str, n: int, seed: int, all_items: list[str]) -> list[str]:
    touched = set(ds.sequences[user])
    free = [i for i in all_items if i not in touched]
    if len(free) < n:
        raise DataError(f"user {user!r} has only {len(free)} untouched items; cannot draw {n} negatives")
    return stable_rng(seed, user, "negatives").sample(free, n)


def ranking_candidates(ds: Dataset, cfg: BeyondUtilityConfig, users: list[str]) -> dict[str, list[str]]:
    """user → [target] + negatives (raw ids, unshuffled: the base set B_u)."""
    all_items = sorted(ds.int_id)
    return {u: [ds.sequences[u][-1]] + negatives(ds, u, cfg.num_negatives, cfg.seed, all_items) for u in users}


def read_pool(path: Path, ds: Dataset) -> dict[str, list[str]]:
    """Re-ranking pool: JSONL ``{"user_id": str, "candidates": [raw item id, ...]}``."""
    out = {}
    if not Path(path).is_file():
        raise DataError(f"pool_path not found: {path}")
    for no, text in enumerate(read_utf8(path).splitlines(), 1):
        if not text.strip():
            continue
        obj = json.loads(text)
        cands = [str(c) for c in obj.get("candidates", [])]
        unknown = [c for c in cands if c not in ds.int_id]
        if not cands or unknown:
            raise DataError(f"{path}: line {no}: candidates must be known raw item ids, unknown {unknown[:3]}")
        out[str(obj["user_id"])] = cands
    return out


def presented(cfg: BeyondUtilityConfig, user: str, cands: list[str], target: str, order: str) -> list[str]:
    """The candidates in the order shown: target first (when present) or a stable per-user shuffle."""
    if order == "target_first":
        return ([target] if target in cands else []) + [c for c in cands if c != target]
    shuffled = list(cands)
    stable_rng(cfg.seed, user, "shuffle").shuffle(shuffled)
    return shuffled


def choose_users(ds: Dataset, cfg: BeyondUtilityConfig, eligible: list[str]) -> tuple[list[str], dict]:
    if cfg.users.statistic == "file":
        values = read_values(cfg.users.values_path, cfg.users.values_column)
        stat = {u: values[u] for u in eligible if u in values}
    else:
        stat = {u: float(len(ds.sequences[u]) - 1) for u in eligible}
    return sample_users(stat, cfg.users)


def settings(cfg: BeyondUtilityConfig) -> list[tuple[str, int | None, str]]:
    return [(p, h, o) for p in cfg.prompts for h in cfg.history_lens for o in cfg.orders]


def build(cfg: BeyondUtilityConfig, ds: Dataset, templates_dir: Path, catalog_key: str) -> list[dict]:
    pool = read_pool(cfg.pool_path, ds) if cfg.task == "reranking" else None
    eligible = sorted(pool) if pool is not None else sorted(ds.sequences)
    eligible = [u for u in eligible if u in ds.sequences]
    users, draw = choose_users(ds, cfg, eligible)
    bases = ranking_candidates(ds, cfg, users)  # re-ranking keeps them as base_candidates (MostPop, coverage)
    shown = pool if pool is not None else bases
    texts = {s: prompts.read_paraphrases(templates_dir, s)
             for s in set(cfg.prompts) | {"no_history", "profile_generate"}}
    out = []
    for user in users:
        seq, base = ds.sequences[user], bases[user]
        for strategy, hist, order in settings(cfg):
            out.append(_sample(cfg, ds, texts, user, seq, base, shown[user], strategy, hist, order, draw,
                               catalog_key))
    if cfg.limit is not None:
        out = out[: cfg.limit]
    return out


def _sample(cfg, ds, texts, user, seq, base, pool, strategy, shown, order, draw, catalog_key) -> dict:
    history = seq[:-1] if shown is None else (seq[:-1][-shown:] if shown > 0 else [])
    use = "no_history" if shown == 0 and strategy in ("history", "candidates_first") else strategy
    lines = texts[use]
    idx = prompts.pick_paraphrase(len(lines), cfg.paraphrase, cfg.paraphrase_index, cfg.seed, user, use)
    gen = texts["profile_generate"]
    gen_idx = prompts.pick_paraphrase(len(gen), cfg.paraphrase, cfg.paraphrase_index, cfg.seed, user, "gen")
    cands = presented(cfg, user, pool, seq[-1], order)
    t = ds.titles
    hist_s = "all" if shown is None else str(shown)
    return {
        "sample_id": f"{user}|{strategy}|h{hist_s}|{order}",
        "user_id": user, "prompt": strategy, "history_shown": hist_s, "order": order,
        "template": use, "paraphrase": idx, "profile_paraphrase": gen_idx if "profile" in strategy else None,
        "target": ds.int_id[seq[-1]], "candidates": [ds.int_id[c] for c in cands],
        "base_candidates": [ds.int_id[c] for c in base], "history_len": len(seq) - 1,
        "list_len": cfg.list_len, "user_draw": draw, "catalog_key": catalog_key,
        "_text": lines[idx], "_profile_text": gen[gen_idx],
        "_history_titles": [t[ds.int_id[i]] for i in history],
        "_candidate_titles": [t[ds.int_id[c]] for c in cands],
        # stored for people reading results (llmrec view, the report): ids as titles without the catalog
        "target_title": t[ds.int_id[seq[-1]]], "candidate_titles": [t[ds.int_id[c]] for c in cands],
    }
