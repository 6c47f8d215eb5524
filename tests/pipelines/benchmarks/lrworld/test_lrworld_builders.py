"""Each builder's ground truth on hand-made data (no model training)."""

from __future__ import annotations

from llmrec.pipelines.benchmarks.lrworld.builders import build_measures
from llmrec.pipelines.benchmarks.lrworld.builders.association import build_association, frequent_itemsets, rules_for
from llmrec.pipelines.benchmarks.lrworld.builders.knowledge import build_knowledge
from llmrec.pipelines.benchmarks.lrworld.builders.memory import build_memory
from llmrec.pipelines.benchmarks.lrworld.builders.neural import build_neural, prototypes
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog, pop_groups
from llmrec.pipelines.benchmarks.lrworld.config import BuildConfig


def test_rule_must_be_found(rule_catalog):
    rules = rules_for(frequent_itemsets(rule_catalog, 0.01, 2), 0.01, 2)
    ab = rules[(rules.antecedents == ("a",)) & (rules.consequents == ("b",))]
    assert len(ab) == 1 and float(ab.confidence.iloc[0]) == 1.0
    samples = build_association(rule_catalog, 100, seed=3)
    by_ante = {tuple(s["history_ids"]): s for s in samples}
    s = by_ante[("a",)]
    assert s["candidate_ids"][0] == "b" and s["candidates"][0] == "Item b"
    assert not {"a", "b"} & set(s["candidate_ids"][1:]) and len(s["candidates"]) == 10
    assert by_ante[("x3",)]["candidate_ids"][0] == "y3"
    assert s["provenance"]["confidence"] == 1.0 and s["kind"] == "hit1"


def test_association_is_reproducible_and_seeded(rule_catalog):
    a, b = build_association(rule_catalog, 5, seed=1), build_association(rule_catalog, 5, seed=1)
    assert a == b
    assert [s["history_ids"] for s in a] != [s["history_ids"] for s in build_association(rule_catalog, 5, seed=2)]


def test_association_support_threshold_filters(rule_catalog):
    assert build_association(rule_catalog, 10, 0, min_support=0.6) == []  # no pair in 60% of users


def test_item_item_most_similar_known(sim_catalog):
    samples = build_memory(sim_catalog, "item", 100, seed=0)
    s = next(x for x in samples if x["provenance"]["target"] == "A")
    assert s["candidate_ids"][0] == "B" and s["provenance"]["gold_similarity"] == 1.0
    assert s["target"] == "Title A" and "C" not in s["candidate_ids"]  # C is similar (0.58): never a negative
    assert all(v < 0.01 for v in s["provenance"]["negative_similarities"])
    assert s["provenance"]["negative_pool"] == "below_threshold"


def test_user_user_most_similar_known(sim_catalog):
    samples = build_memory(sim_catalog, "user", 100, seed=0)
    s = next(x for x in samples if x["user_id"] == "u2")
    assert s["candidate_ids"][0] == "u3"  # identical item sets
    assert s["history"] == ["Title A", "Title B"] and s["candidates"][0] == "Title A; Title B"


def test_embedding_nearest_neighbours(embedding_fixture):
    catalog, emb = embedding_fixture
    for s in build_neural(catalog, emb, "item_users", 100, seed=0, clusters=3, per_cluster=4):
        k = s["provenance"]["target"][1:]
        assert s["candidate_ids"][0] == f"u{k}"
        assert max(s["provenance"]["negative_similarities"]) < s["provenance"]["gold_similarity"]
    for s in build_neural(catalog, emb, "user_items", 100, seed=0, clusters=3, per_cluster=4):
        k = s["user_id"][1:]
        assert s["candidate_ids"][0] == f"i{k}" and s["history_ids"] == catalog.histories[s["user_id"]]


def test_prototypes_are_cluster_centres():
    import numpy as np

    pts = np.array([[0, 0], [0.1, 0], [-0.1, 0], [10, 10], [10.1, 10], [9.9, 10]], dtype="float32")
    first = set(prototypes(pts, 2, 1, seed=0))
    assert first == {0, 3}


def test_knowledge_asks_about_next_item(sim_catalog):
    samples = build_knowledge(sim_catalog, "genres", sim_catalog.attributes["genres"], 100, seed=0, history_len=2)
    s = next(x for x in samples if x["user_id"] == "u1")
    assert s["candidate_ids"][0] == "C" and s["candidates"][0] == sim_catalog.attributes["genres"]["C"]
    assert s["history_ids"] == ["A", "B"] and len(set(s["candidates"])) == 4 and s["kind"] == "mcq"


def test_build_measures_reports_not_built(sim_catalog):
    samples, not_built = build_measures(sim_catalog, BuildConfig(per_measure=3))
    measures = {s["measure"] for s in samples}
    assert "memory_item_item/toy/item" in measures and "entity_attribute/toy/genres" in measures
    assert "neural_item_users/toy/user" in not_built and "multimodal/toy/image_description" in not_built
    assert "taxonomy/toy/leaf" in not_built and "text_knowledge/toy/description" in not_built
    # decade has a single value: no 3 negatives -> reported, not silently absent
    assert "entity_attribute/toy/decade" in not_built


def test_pop_groups():
    cat = Catalog("t", "movie", {}, {"u": ["a", "b"], "v": ["a"], "w": ["a"]})
    assert pop_groups(cat) == {"a": "pop", "b": "non-pop"}


def test_rules_for_some_antecedents_equal_the_full_rules():
    import random

    from llmrec.pipelines.benchmarks.lrworld.builders.association import frequent_itemsets, rules_for

    rng = random.Random(0)
    hist = {f"u{k}": rng.sample([f"i{j}" for j in range(12)], 5) for k in range(40)}
    cat = Catalog("t", "movie", {f"i{j}": f"I{j}" for j in range(12)}, hist)
    for max_len in (2, 3):
        freq = frequent_itemsets(cat, 0.05, max_len)
        full = rules_for(freq, 0.1, max_len)
        wanted = {("i1",), ("i3",), ("i2", "i5")} if max_len == 3 else {("i1",), ("i3",)}
        part = rules_for(freq, 0.1, max_len, wanted)
        expect = full[full.antecedents.isin(wanted)].sort_values(["antecedents", "consequents"])
        got = part.sort_values(["antecedents", "consequents"])
        assert len(got) > 0 and got.reset_index(drop=True).equals(expect.reset_index(drop=True))


def test_embedding_files_as_llmrec_train_writes_them(embedding_fixture, tmp_path):
    import pandas as pd
    import pytest

    from llmrec.errors import DataError
    from llmrec.pipelines.benchmarks.lrworld.builders.neural import read_embeddings

    catalog, emb = embedding_fixture
    for key, ids, vec in (("user", emb.user_ids, emb.users), ("item", emb.item_ids, emb.items)):
        pd.DataFrame({f"{key}_id": ids, "embedding": list(vec)}).to_parquet(tmp_path / f"{key}_embeddings.parquet")
    got = read_embeddings(tmp_path)
    assert got.user_ids == emb.user_ids and (got.items == emb.items).all()
    assert build_neural(catalog, got, "item_users", 5, 0, clusters=3) == \
        build_neural(catalog, emb, "item_users", 5, 0, clusters=3)
    (tmp_path / "item_embeddings.parquet").unlink()
    with pytest.raises(DataError, match="item_embeddings.parquet"):
        read_embeddings(tmp_path)
