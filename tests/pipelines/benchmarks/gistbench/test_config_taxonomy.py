"""Config validation, the taxonomy file, the shared mapping cache and the embedding mapper."""

from __future__ import annotations

import pytest

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines.registry import benchmark_config
from llmrec.pipelines.benchmarks.gistbench import taxonomy
from tests.conftest import require_data


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="Unknown GISTBench dataset 'netflix'"):
        benchmark_config({"name": "gistbench", "dataset": "netflix"})
    with pytest.raises(ConfigError, match="unknown key 'benchmark.judge.retry'"):
        benchmark_config({"name": "gistbench", "judge": {"retry": 1}})
    with pytest.raises(ConfigError, match="max_backing"):
        benchmark_config({"name": "gistbench", "specificity": {"max_backing": 50}})
    with pytest.raises(ConfigError, match="chunk sizes"):
        benchmark_config({"name": "gistbench", "extraction": {"chunk_sizes": [100, 100]}})
    cfg = benchmark_config({"name": "gistbench", "dataset": "amazon_digital_music"})
    assert cfg.dataset == "amazon_music"


def test_bundled_categories():
    cats = taxonomy.load_categories(require_data("gistbench/gistbench/assets/categories.csv"))
    assert len(cats) == 325 and cats[0] == [1, "A.I. Art"] and [146, "Instrumental Music"] in cats


def test_category_file_errors(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("category_id,category_name\n0,Other\n")
    with pytest.raises(DataError, match="reserved"):
        taxonomy.load_categories(p)
    with pytest.raises(DataError, match="not found"):
        taxonomy.load_categories(tmp_path / "none.csv")


def test_cache_first_writer_wins_and_namespaces(tmp_path):
    cats = [[1, "Music"], [2, "Sport"]]
    a = taxonomy.TaxonomyCache(tmp_path / "t.sqlite", taxonomy.namespace("llm", cats))
    assert a.get_many(["jazz"]) == {}
    assert a.put_many({"jazz": 1, "golf": 0}) == {"jazz": 1, "golf": 0}
    assert a.put_many({"jazz": 2, "tennis": 2}) == {"jazz": 1, "tennis": 2}  # a later model reuses "jazz"
    other = taxonomy.TaxonomyCache(tmp_path / "t.sqlite", taxonomy.namespace("llm", cats + [[3, "Food"]]))
    assert other.get_many(["jazz"]) == {}  # another category list never reuses the mapping


def test_own_category_is_stable_and_negative():
    assert taxonomy.own_category("Jazz") == taxonomy.own_category("Jazz") < 0
    assert taxonomy.own_category("Jazz") != taxonomy.own_category("Golf")


@pytest.mark.slow
@pytest.mark.model
def test_embedding_mapper_nearest_category():
    cats = taxonomy.load_categories(require_data("gistbench/gistbench/assets/categories.csv"))
    mapping = taxonomy.EmbeddingMapper(cats).map(["Mountain hiking trails", "NBA basketball highlights"])
    names = dict((cid, name) for cid, name in cats)
    assert names[mapping["Mountain hiking trails"]] == "Hiking"
    assert "Basketball" in names[mapping["NBA basketball highlights"]]
