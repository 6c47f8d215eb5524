"""`export-sft` records the held-out topics; no training record is from a held-out topic."""

import json

import pytest

from llmrec.pipelines.benchmarks.prefeval.sft import REFERENCE_TEST_TOPICS, export_sft
from tests.conftest import require_data
from tests.pipelines.benchmarks.prefeval.test_prefeval_tools import source_run


@pytest.fixture(scope="module")
def data():
    return require_data("prefeval", "benchmark_dataset", "filtered_inter_turns.json").parents[2]


def test_manifest_records_heldout_topics(tmp_path, data):
    export_sft([source_run(tmp_path)], data, tmp_path / "sft", turns=(0, 5))
    manifest = json.loads((tmp_path / "sft/manifest.json").read_text())
    assert manifest["test_topics"] == sorted(REFERENCE_TEST_TOPICS)
    assert manifest["train_topics"] == ["travel_hotel"]
    assert manifest["counts"] == {"train": 2, "test": 2}
    train = [json.loads(x) for x in (tmp_path / "sft/train.jsonl").read_text().splitlines()]
    assert not {r["topic"] for r in train} & set(manifest["test_topics"])
