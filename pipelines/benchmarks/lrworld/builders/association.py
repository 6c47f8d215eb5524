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


def mine_rules(catalog: Catalog, min_support: float, min_confidence: float, max_len: int) -> pd.DataFrame:
    """Rules as a frame (antecedents, consequents as sorted tuples, support, confidence, lift)."""
    from mlxtend.frequent_patterns import apriori, association_rules

    users = sorted(catalog.histories)
    counts = pd.Series([i for u in users for i in set(catalog.histories[u])]).value_counts()
    keep = sorted(counts[counts >= min_support * len(users)].index)  # apriori would drop the rest anyway
    if not keep:
        return pd.DataFrame(columns=["antecedents", "consequents", "support", "confidence", "lift"])
    col = {i: k for k, i in enumerate(keep)}
    arr = np.zeros((len(users), len(keep)), dtype=bool)
    for r, u in enumerate(users):
        for i in set(catalog.histories[u]):
            if i in col:
                arr[r, col[i]] = True
    onehot = pd.DataFrame(arr, columns=keep)
    freq = apriori(onehot, min_support=min_support, use_colnames=True, max_len=max_len)
    if len(freq) == 0 or freq["itemsets"].map(len).max() < 2:
        return pd.DataFrame(columns=["antecedents", "consequents", "support", "confidence", "lift"])
    rules = association_rules(freq, metric="confidence", min_threshold=min_confidence)
    rules = rules[rules["consequents"].map(len) == 1].copy()
    rules["antecedents"] = rules["antecedents"].map(lambda s: tuple(sorted(s)))
    rules["consequents"] = rules["consequents"].map(lambda s: tuple(sorted(s)))
    return rules[["antecedents", "consequents", "support", "confidence", "lift"]].reset_index(drop=True)


def build_association(catalog: Catalog, n: int, seed: int, min_support: float = 0.01,
                      min_confidence: float = 0.01, max_len: int = 2) -> list[dict]:
    rules = mine_rules(catalog, min_support, min_confidence, max_len)
    if rules.empty:
        return []
    rules = rules.assign(cons=rules["consequents"].map(lambda c: c[0]))
    rules = rules.sort_values(["antecedents", "confidence", "lift", "cons"], ascending=[True, False, False, True])
    by_ante = {a: g for a, g in rules.groupby("antecedents", sort=True)}
    antecedents = sorted(by_ante)
    rng = random.Random(seed)
    rng.shuffle(antecedents)
    out = []
    for ante in antecedents:
        if len(out) >= n:
            break
        group = by_ante[ante]
        best = group.iloc[0]
        excluded = set(ante) | set(group["cons"])
        negs = draw(random.Random(f"{seed}/{ante}"), (i for i in catalog.items if i not in excluded), 9)
        if negs is None:
            continue
        out.append(make_sample(
            "association_rules", catalog.name, "item", len(out), domain=catalog.domain,
            gold=catalog.items[best["cons"]], gold_id=best["cons"],
            negatives=[catalog.items[i] for i in negs], negative_ids=negs,
            history=[catalog.items[i] for i in ante], history_ids=list(ante),
            provenance={"builder": "association", "seed": seed, "min_support": min_support,
                        "min_confidence": min_confidence, "max_len": max_len,
                        "support": float(best["support"]), "confidence": float(best["confidence"]),
                        "lift": float(best["lift"]), "rules_mined": int(len(rules))}))
    return out
