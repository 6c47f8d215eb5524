"""Multimodal input file, catalogue loaders on the shared data, and the build verb."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llmrec.errors import DataError
from llmrec.pipelines.benchmarks.lrworld.builders import build_measures
from llmrec.pipelines.benchmarks.lrworld.catalog import Catalog, read_descriptions
from llmrec.pipelines.benchmarks.lrworld.config import BuildConfig
from tests.conftest import require_data


def test_multimodal_built_only_from_a_file(sim_catalog, tmp_path):
    f = tmp_path / "img.jsonl"
    f.write_text("".join(json.dumps({"item_id": i, "description": f"A poster showing {i} " + "x" * 400}) + "\n"
                         for i in sim_catalog.items))
    images = read_descriptions(f)
    samples, not_built = build_measures(sim_catalog, BuildConfig(per_measure=100, max_text_chars=60), images=images)
    mm = [s for s in samples if s["factor"] == "multimodal"]
    assert mm and "multimodal/toy/image_description" not in not_built
    s = next(x for x in mm if x["user_id"] == "u1")
    assert s["candidates"][0].startswith("A poster showing C") and len(s["candidates"][0]) <= 62
    assert s["history"][0].startswith("A poster showing A")
    f.write_text(json.dumps({"item_id": "A", "description": ""}) + "\n")
    with pytest.raises(DataError, match="line 1"):
        read_descriptions(f)


def test_taxonomy_levels_are_separate_measures():
    hist = {f"u{k}": [f"i{(k + j) % 8}" for j in range(4)] for k in range(8)}
    items = {f"i{k}": f"Product {k}" for k in range(8)}
    cats = {f"i{k}": ["Beauty", f"Mid{k % 5}", f"Leaf{k}"] for k in range(8)}
    cats.update({f"i{k}": [f"Root{k}", "Mid", f"Leaf{k}"] for k in range(4)})
    cat = Catalog("toy", "product", items, hist, {"brand": {i: f"B{i}" for i in items}}, cats)
    samples, not_built = build_measures(cat, BuildConfig(per_measure=4, factors=["taxonomy"]))
    by = {s["field"]: s for s in samples}
    assert set(by) == {"root", "intermediate", "leaf"}
    for s in samples:
        level = {"root": 0, "intermediate": 1, "leaf": 2}[s["field"]]
        assert s["candidates"][0] == cats[s["candidate_ids"][0]][level]


@pytest.mark.parametrize("preset,measures", [
    pytest.param("ml-100k", {"association_rules/ml-100k/item", "entity_attribute/ml-100k/genres",
                             "entity_attribute/ml-100k/decade"}, marks=[pytest.mark.slow, pytest.mark.integration]),  # apriori on ML-100K: ~1 min
    ("amazon-beauty", {"entity_relation/amazon-beauty/brand", "text_knowledge/amazon-beauty/description"}),
])
def test_build_verb_on_shared_data(preset, measures, tmp_path):
    from llmrec.cli import _mount_benchmark_clis, app

    path = {"ml-100k": ("ml-100k", "u.data"), "amazon-beauty": ("amazon-all-beauty-2023", "filterd_meta_items.csv")}
    root = require_data(*path[preset]).parent.parent
    _mount_benchmark_clis()
    out = tmp_path / "set"
    res = CliRunner().invoke(app, ["lrworld", "build", "--source", preset, "--set", "per_measure=2",
                                   "--set", "factors=[association_rules,entity_attribute,entity_relation,"
                                   "text_knowledge]", "--data-dir", str(root), "--out", str(out)])
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert measures <= set(manifest["counts"]) and all(n == 2 for n in manifest["counts"].values())
    assert "not built" in res.output or preset == "amazon-beauty"


def test_movielens_catalog_from_files(tmp_path):
    from llmrec.interactions import DataSpec
    from llmrec.pipelines.benchmarks.lrworld.catalog import load_catalog

    d = tmp_path / "ml"
    d.mkdir()
    (d / "u.data").write_text("1\t10\t5\t300\n1\t20\t3\t100\n2\t10\t4\t50\n")
    flags = lambda *on: "|".join("1" if k in on else "0" for k in range(19))  # noqa: E731
    (d / "u.item").write_text(f"10|Heat (1995)|01-Jan-1995||http://x|{flags(1, 6)}\n"
                              f"20|Nameless|01-Jan-1972||http://y|{flags(0)}\n", encoding="latin-1")
    cat = load_catalog("ml", DataSpec(format="movielens-100k", path=d))
    assert cat.histories == {"1": ["20", "10"], "2": ["10"]} and cat.ordered
    assert cat.attributes["genres"] == {"10": "Action, Crime"} and cat.attributes["decade"] == {"10": "1990s",
                                                                                              "20": "1970s"}
    assert cat.items["10"] == "Heat (1995), Action|Crime" and cat.items["20"] == "Nameless, unknown genre"


def test_missing_description_file_is_named(tmp_path):
    with pytest.raises(DataError, match="image-description file not found: .*nope.jsonl"):
        read_descriptions(tmp_path / "nope.jsonl")
