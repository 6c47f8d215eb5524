"""Association — rule mining (paper §3 (a)): users' item sets are transactions; mlxtend's
apriori + association_rules give the rules; a sample shows a rule's antecedent items and
asks for the consequent among 10 candidates.

Choices the paper leaves open (README): ``max_len`` caps itemset size (2 by default: one
antecedent → one consequent; unbounded apriori on ML-100K at support 0.01 does not finish);
each antecedent yields at most one sample, its gold is the consequent of highest
confidence (ties: lift, then item id); the 9 negatives are items that are neither in the
antecedent nor a consequent of any mined rule with that antecedent.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd

from llmrec.pipelines.benchmarks.lrworld.builders.common import draw, make_sample
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog


RULE_COLUMNS = ["antecedents", "consequents", "support", "confidence", "lift"]


def frequent_itemsets(catalog: Catalog, min_support: float, max_len: int) -> pd.DataFrame:
    """mlxtend apriori over users' item sets (``low_memory``: same itemsets, half the time on ML-100K)."""
    from mlxtend.frequent_patterns import apriori

    users = sorted(catalog.histories)
    counts = pd.Series([i for u in users for i in set(catalog.histories[u])]).value_counts()
    keep = sorted(counts[counts >= min_support * len(users)].index)  # apriori would drop the rest anyway
    if not keep:
        return pd.DataFrame(columns=["support", "itemsets"])
    col = {i: k for k, i in enumerate(keep)}
    arr = np.zeros((len(users), len(keep)), dtype=bool)
    for r, u in enumerate(users):
        for i in set(catalog.histories[u]):
            if i in col:
                arr[r, col[i]] = True
    return apriori(pd.DataFrame(arr, columns=keep), min_support=min_support, use_colnames=True, max_len=max_len,
                   low_memory=True)


def rules_for(freq: pd.DataFrame, min_confidence: float, max_len: int,
              antecedents: set[tuple] | None = None) -> pd.DataFrame:
    """mlxtend association_rules with one consequent item (antecedents, consequents as sorted tuples).

    ``antecedents``: only rules with these antecedents. association_rules is then given the
    itemsets it needs for them (every itemset smaller than ``max_len``, and the larger ones
    one item beyond a wanted antecedent) — same rules, without scoring the whole lattice.
    """
    from mlxtend.frequent_patterns import association_rules

    if antecedents is not None:
        def needed(items: frozenset) -> bool:
            return len(items) < max_len or any(tuple(sorted(items - {x})) in antecedents for x in items)

        freq = freq[freq["itemsets"].map(needed)]
    if len(freq) == 0 or freq["itemsets"].map(len).max() < 2:
        return pd.DataFrame(columns=RULE_COLUMNS)
    rules = association_rules(freq, metric="confidence", min_threshold=min_confidence)
    rules = rules[rules["consequents"].map(len) == 1].copy()
    rules["antecedents"] = rules["antecedents"].map(lambda s: tuple(sorted(s)))
    rules["consequents"] = rules["consequents"].map(lambda s: tuple(sorted(s)))
    if antecedents is not None:
        rules = rules[rules["antecedents"].isin(antecedents)]
    return rules[RULE_COLUMNS].reset_index(drop=True)


def build_association(catalog: Catalog, n: int, seed: int, min_support: float = 0.01,
                      min_confidence: float = 0.01, max_len: int = 2) -> list[dict]:
    """Frequent itemsets smaller than ``max_len`` are the antecedent pool, visited in a seeded random
    order (in chunks, rules computed per chunk); one sample per antecedent that has a rule."""
    freq = frequent_itemsets(catalog, min_support, max_len)
    pool = sorted(tuple(sorted(i)) for i in freq["itemsets"] if len(i) < max_len)
    random.Random(seed).shuffle(pool)
    out: list[dict] = []
    chunk = max(2 * n, 64)
    for start in range(0, len(pool), chunk):
        if len(out) >= n:
            break
        part = pool[start:start + chunk]
        rules = rules_for(freq, min_confidence, max_len, set(part))
        for ante in part:
            if len(out) >= n:
                break
            sample = _sample(catalog, rules[rules["antecedents"] == ante], ante, len(out), seed,
                             {"min_support": min_support, "min_confidence": min_confidence, "max_len": max_len,
                              "frequent_itemsets": int(len(freq))})
            if sample is not None:
                out.append(sample)
    return out


def _sample(catalog: Catalog, group: pd.DataFrame, ante: tuple, index: int, seed: int, params: dict) -> dict | None:
    if group.empty:
        return None
    group = group.assign(cons=group["consequents"].map(lambda c: c[0]))
    best = group.sort_values(["confidence", "lift", "cons"], ascending=[False, False, True]).iloc[0]
    excluded = set(ante) | set(group["cons"])
    negs = draw(random.Random(f"{seed}/{ante}"), (i for i in catalog.items if i not in excluded), 9)
    if negs is None:
        return None
    return make_sample(
        "association_rules", catalog.name, "item", index, domain=catalog.domain,
        gold=catalog.items[best["cons"]], gold_id=best["cons"],
        negatives=[catalog.items[i] for i in negs], negative_ids=negs,
        history=[catalog.items[i] for i in ante], history_ids=list(ante),
        provenance={"builder": "association", "seed": seed, **params, "support": float(best["support"]),
                    "confidence": float(best["confidence"]), "lift": float(best["lift"]),
                    "antecedent_rules": int(len(group))})
