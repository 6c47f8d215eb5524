"""The verification predicate φ_D (paper §4.2, eq. 1–5) and the IG failure modes (Table 7).

The rules are data (``positive_rules``/``negative_limits``): the predicate evaluates
them and ``prompts`` writes the same rules into the extraction prompt, so instruction
and evaluation cannot drift apart (closed loop, §4.1). A rule applies only when the
dataset has every engagement type it names.
"""

from __future__ import annotations

from typing import Iterable

from llmrec.pipelines.benchmarks.gistbench import schema as S
from llmrec.pipelines.benchmarks.gistbench.config import Thresholds

Evidence = dict[str, str]  # {"object_id", "engagement_type"}


def positive_rules(signals: Iterable[str], t: Thresholds) -> list[dict[str, int]]:
    """Alternatives, at least one must hold: each maps an engagement type to a minimum count."""
    rules = [{S.IMP_POS: t.imp_pos_min}, {S.EXP_POS: t.exp_pos_min},
             {S.EXP_POS: t.hybrid_exp_pos_min, S.IMP_POS: t.hybrid_imp_pos_min}]
    have = set(signals)
    return [r for r in rules if set(r) <= have]


def negative_limits(signals: Iterable[str], t: Thresholds) -> dict[str, int]:
    """Maximum count per negative type the dataset has; more invalidates the interest."""
    limits = {S.IMP_NEG: t.imp_neg_max, S.EXP_NEG: t.exp_neg_max}
    have = set(signals)
    return {k: v for k, v in limits.items() if k in have}


def evidence_for(object_ids: Iterable[str], types_by_object: dict[str, list[str]]) -> list[Evidence]:
    """Evidence entries of the ids found in the history: one per (object, engagement type)."""
    out: list[Evidence] = []
    seen: set[str] = set()
    for oid in object_ids:
        if oid in seen or oid not in types_by_object:
            continue
        seen.add(oid)
        out.extend({S.OBJECT_ID: oid, S.ENGAGEMENT_TYPE: t} for t in types_by_object[oid])
    return out


def count_evidence(evidence: Iterable[Evidence]) -> dict[str, int]:
    """Unique objects per engagement type (eq. 1–4)."""
    ids: dict[str, set[str]] = {t: set() for t in S.ENGAGEMENT_TYPES}
    for e in evidence:
        kind = e[S.ENGAGEMENT_TYPE]
        if kind in ids:
            ids[kind].add(str(e[S.OBJECT_ID]))
    return {t: len(v) for t, v in ids.items()}


def verify(counts: dict[str, int], signals: Iterable[str], t: Thresholds) -> bool:
    """φ_D: no excess of negatives and at least one positive rule met; no evidence → False."""
    signals = set(signals)
    if not any(counts.values()):
        return False
    if any(counts.get(k, 0) > limit for k, limit in negative_limits(signals, t).items()):
        return False
    return any(all(counts.get(k, 0) >= need for k, need in rule.items()) for rule in positive_rules(signals, t))


def failure_modes(counts: dict[str, int], signals: Iterable[str], t: Thresholds) -> dict[str, bool]:
    """Why an interest failed (not exclusive; a mode counts only if the dataset has its type)."""
    signals = set(signals)
    return {
        "insufficient_imp_pos": S.IMP_POS in signals and counts.get(S.IMP_POS, 0) < t.imp_pos_min,
        "insufficient_exp_pos": S.EXP_POS in signals and counts.get(S.EXP_POS, 0) < t.exp_pos_min,
        "excessive_neg": any(counts.get(k, 0) > lim for k, lim in negative_limits(signals, t).items()),
    }
