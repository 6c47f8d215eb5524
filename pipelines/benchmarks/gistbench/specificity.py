"""Interest Specificity test sets (paper §4.3), deterministic in every process.

Every random choice draws from ``random.Random(stable_seed(...))`` (blake2b of the
parts), never from Python's per-process ``hash``: the pool, the backing sample, the
distractors and the shuffle are identical across Ray workers, runs and machines.
The reference seeds each interest with ``hash((42, name, idx))``, which changes with
``PYTHONHASHSEED``.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmrec.pipelines.common.seeding import stable_rng, stable_seed
from llmrec.pipelines.benchmarks.gistbench.config import SpecificityConfig

Obj = list[str]  # [object_id, object_text] (JSON-able)


def build_pool(objects: dict[str, str], size: int, seed: int) -> list[Obj]:
    """The global pool: ``size`` unique objects of all users, ordered by a stable hash of the id."""
    ranked = sorted(objects, key=lambda oid: (stable_seed("gistbench/pool", seed, oid), oid))
    return [[oid, objects[oid]] for oid in ranked[:size]]


def overlap_candidates(pool: list[Obj], user_objects: set[str], exclude_user_objects: bool) -> list[Obj]:
    """The pool objects the overlap filter is asked about (the user's own left out if configured)."""
    if not exclude_user_objects:
        return list(pool)
    return [o for o in pool if o[0] not in user_objects]


def backing_candidates(cited: list[str], history: dict[str, str]) -> list[str]:
    """Cited ids present in the user's history, unique, in a canonical order."""
    return sorted({c for c in cited if c in history})


@dataclass(frozen=True)
class ProbeSet:
    items: list[Obj]  # shuffled backing + distractors
    backing: list[str]

    @property
    def ids(self) -> list[str]:
        return [o[0] for o in self.items]


def build_test_set(user_id: str, interest: str, cited: list[str], history: dict[str, str],
                   candidates: list[Obj], removed: set[str], cfg: SpecificityConfig) -> ProbeSet:
    """≤ ``max_backing`` backing objects + distractors from the filtered pool, shuffled.

    ``candidates`` is ``overlap_candidates(...)``; ``removed`` the ids the overlap filter
    dropped. The seed depends only on (seed, user, interest), so the same interest of the
    same user gets the same test set for every model whose citations agree.
    """
    rng = stable_rng("gistbench/is", cfg.seed, user_id, interest)
    backing = backing_candidates(cited, history)
    if len(backing) > cfg.max_backing:
        backing = sorted(rng.sample(backing, cfg.max_backing))
    if not backing:
        return ProbeSet([], [])
    taken = set(backing)
    pool = [o for o in candidates if o[0] not in removed and o[0] not in taken]
    distractors = rng.sample(pool, min(cfg.test_set_size - len(backing), len(pool)))
    items = [[b, history[b]] for b in backing] + [list(o) for o in distractors]
    rng.shuffle(items)
    return ProbeSet(items, backing)


def count_correct(selected: list[str], backing: list[str]) -> int:
    """correct = |selected ∩ backing| (selecting more than asked is not penalized, as in the reference)."""
    return len(set(selected) & set(backing))
