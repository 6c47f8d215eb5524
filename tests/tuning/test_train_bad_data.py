"""`llmrec train` on data it cannot train on: one line naming the file, before any training (not
`KeyError: 'valid/ndcg@10'` after it)."""

from __future__ import annotations

from typer.testing import CliRunner

from llmrec.cli import app
from tests.tuning.helpers import base_config, write_config


def _train(tmp_path, header_only: bool = True):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "inter.csv").write_text("uid,iid,r,ts\n" if header_only else "uid,iid,r,ts\nu1,i1,1,1\nu1,i2,1,2\n")
    path = write_config(tmp_path, base_config(tmp_path))
    return CliRunner().invoke(app, ["train", path])


def test_empty_ratings_file_is_a_clear_error(tmp_path):
    res = _train(tmp_path)
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"error: {tmp_path / 'data' / 'inter.csv'}" in text and "no interactions to split" in text, text
    assert "KeyError" not in text and "valid/ndcg" not in text


def test_a_split_that_leaves_valid_or_test_empty_is_a_clear_error(tmp_path):
    from llmrec.errors import DataError
    from llmrec.interactions.config import SplitConfig
    from llmrec.interactions.splits import split_interactions
    import pandas as pd
    import pytest

    df = pd.DataFrame({"user_id": ["u1"] * 3, "item_id": ["a", "b", "c"], "rating": [1.0] * 3,
                       "timestamp": [1, 2, 3]})
    with pytest.raises(DataError, match=r"ratings.csv: the temporal split of 3 interactions leaves valid and test"):
        split_interactions(df, SplitConfig(protocol="temporal", ratios=[1.0, 0.0, 0.0]), "ratings.csv")
