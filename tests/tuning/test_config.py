"""Train/tune config validation: defaults from model configs, errors naming keys."""

from __future__ import annotations

import pytest

from llmrec.config import load_config, validate
from llmrec.errors import ConfigError
from tests.tuning.helpers import base_config, write_config
from llmrec.tuning.config import TrainConfig, TuneConfig, set_path

SPACE = {"train.learning_rate": {"type": "loguniform", "low": 0.001, "high": 0.1}}


def test_model_defaults_come_from_the_model_config(tmp_path):
    cfg = validate(TrainConfig, {**base_config(tmp_path), "model": {"name": "NeuMF"}})
    assert cfg.model.name == "neumf" and cfg.model.mlp_hidden_size == [128, 64]
    assert cfg.train.metric == "ndcg@10" and cfg.split.candidates.mode == "full"


def test_unknown_model_key_names_its_path(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'model.embeding_size'"):
        validate(TrainConfig, {**base_config(tmp_path), "model": {"name": "bprmf", "embeding_size": 8}})


def test_overrides_apply_before_validation(tmp_path):
    path = write_config(tmp_path, base_config(tmp_path))
    cfg = load_config(TrainConfig, path, ["model.embedding_size=32", "split.protocol=random"])
    assert cfg.model.embedding_size == 32 and cfg.split.protocol == "random"
    with pytest.raises(ConfigError, match="'split.protocol'"):
        load_config(TrainConfig, path, ["split.protocol=shuffle"])


def test_split_ratios_must_sum_to_one(tmp_path):
    with pytest.raises(ConfigError, match="sum to 1"):
        validate(TrainConfig, {**base_config(tmp_path), "split": {"ratios": [0.8, 0.1, 0.2]}})


def test_search_space_keys_must_exist(tmp_path):
    cfg = validate(TuneConfig, {**base_config(tmp_path), "tune": {"search_space": SPACE}})
    assert cfg.tune.scheduler.type == "asha" and cfg.tune.max_concurrent is None  # fit to the cluster at run time
    bad = {"model.embeding_size": {"type": "choice", "values": [8]}}
    with pytest.raises(ConfigError, match="no 'embeding_size' under model; allowed: \\['embedding_size', 'name'\\]"):
        validate(TuneConfig, {**base_config(tmp_path), "tune": {"search_space": bad}})


@pytest.mark.parametrize(
    "dim, message",
    [
        ({"type": "loguniform", "low": 0, "high": 1}, "loguniform needs low > 0"),
        ({"type": "uniform", "low": 2, "high": 1}, "needs low < high"),
        ({"type": "choice", "values": []}, "non-empty 'values'"),
        ({"type": "gaussian", "low": 0, "high": 1}, "tune.search_space.x.type"),
    ],
)
def test_search_dimension_errors(tmp_path, dim, message):
    with pytest.raises(ConfigError, match=message):
        validate(TuneConfig, {**base_config(tmp_path), "tune": {"search_space": {"x": dim}}})


def test_set_path_copies():
    data = {"a": {"b": 1}}
    assert set_path(data, "a.b", 2) == {"a": {"b": 2}} and data == {"a": {"b": 1}}
    with pytest.raises(ConfigError, match="'a.b.c': 'b' is not a mapping"):
        set_path(data, "a.b.c", 1)


def test_default_concurrency_fits_the_cluster():
    from llmrec.tuning.api import fit_concurrency

    assert fit_concurrency({"CPU": 2.0}, 1, 0) == 2
    assert fit_concurrency({"CPU": 16.0, "GPU": 2.0}, 2, 0.5) == 4  # GPUs bound it
    assert fit_concurrency({"CPU": 16.0, "GPU": 8.0}, 4, 1) == 4  # CPUs bound it
    assert fit_concurrency({"CPU": 1.0}, 2, 0) == 1  # never zero: Tune queues it until resources free up
