"""`llmrec train` on data it cannot train on: one line naming the file, before any training (not
`KeyError: 'valid/ndcg@10'` after it)."""

from __future__ import annotations

from typer.testing import CliRunner

from llmrec.cli import app
from tests.tuning.helpers import base_config, write_config


def _train(tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "inter.csv").write_text("uid,iid,r,ts\n")
    path = write_config(tmp_path, base_config(tmp_path))
    return CliRunner().invoke(app, ["train", path])


def test_empty_ratings_file_is_a_clear_error(tmp_path):
    res = _train(tmp_path)
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"error: {tmp_path / 'data' / 'inter.csv'}" in text and "no interactions to split" in text, text
    assert "KeyError" not in text and "valid/ndcg" not in text


def test_a_split_that_leaves_valid_and_test_empty_is_a_clear_error(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "inter.csv").write_text("uid,iid,r,ts\nu1,i1,1,1\nu1,i2,1,2\nu2,i1,1,3\n")
    cfg = base_config(tmp_path, split={"protocol": "temporal", "ratios": [1.0, 0.0, 0.0]})
    res = CliRunner().invoke(app, ["train", write_config(tmp_path, cfg)])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "the temporal split of 3 interactions leaves valid and test empty" in text and "KeyError" not in text
