"""Training samples of the sequence models: RecBole's prefixes (default) and the packed windows option."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from llmrec.errors import ConfigError
from llmrec.models.base import build_model, model_config
from llmrec.models.data import EvalSet, RecData, prefix_batches, sequence_prefixes
from llmrec.models.layers import last_outputs, last_position
from llmrec.models.trainer import seed_everything

# user -> time-ordered train items: no items, one item (no sample), two items (one sample of one
# item), exactly max_len + 1 items, and longer histories whose prefixes are cut to max_len
MAX_LEN = 3
HISTORIES = {0: [], 1: [7], 2: [4, 9], 3: [1, 2, 3, 4], 4: [5, 6, 7, 8, 9, 10, 11], 5: [3, 1, 3, 2, 8]}


def constructed_data() -> RecData:
    """The histories as train rows with users interleaved (round robin), each user's items in time order."""
    rows = [(u, items[t]) for t in range(max(map(len, HISTORIES.values()))) for u, items in HISTORIES.items()
            if t < len(items)]
    users, items = (np.array(col, dtype=np.int64) for col in zip(*rows))
    empty = EvalSet(np.zeros(0, np.int64), [], [])
    return RecData(np.arange(len(HISTORIES)).astype(object), np.arange(12).astype(object), users, items, empty, empty)


def recbole_pairs(users: np.ndarray, items: np.ndarray, max_len: int) -> list[tuple[int, tuple[int, ...], int]]:
    """RecBole 1.2.1's ``SequentialDataset.data_augmentation`` rule, restated: walk the rows sorted by
    user (time order kept); each row after a user's first is a target whose input is the slice of that
    user's rows from ``seq_start`` up to it, ``seq_start`` moving on once the slice would exceed max_len."""
    order = np.argsort(users, kind="stable")
    users, items = users[order], items[order]
    pairs, last, seq_start = [], None, 0
    for i, uid in enumerate(users):
        if uid != last:
            last, seq_start = uid, i
            continue
        if i - seq_start > max_len:
            seq_start += 1
        pairs.append((int(uid), tuple(int(x) for x in items[seq_start:i]), int(items[i])))
    return pairs


def test_prefix_samples_are_recboles_prefix_target_pairs():
    data = constructed_data()
    samples = sequence_prefixes(data, MAX_LEN)
    every = np.arange(len(samples))
    inputs = samples.inputs(every)
    got = [(int(u), tuple(int(x) for x in row[:n]), int(t))
           for u, row, n, t in zip(samples.users, inputs, samples.lens, samples.items[samples.ends])]
    assert sorted(got) == sorted(recbole_pairs(data.train_users, data.train_items, MAX_LEN))
    assert got[:3] == [(2, (4,), 9), (3, (1,), 2), (3, (1, 2), 3)]  # users 0 and 1 give no sample
    assert (4, (8, 9, 10), 11) in got and (5, (3, 1, 3), 2) in got  # cut to the last max_len items
    assert inputs.shape == (len(samples), MAX_LEN) and (inputs[np.arange(len(samples)), samples.lens - 1] > 0).all()
    assert all((row[n:] == 0).all() for row, n in zip(inputs, samples.lens))  # right-padded


def test_prefix_batches_shuffle_every_sample_once_padded_to_the_longest():
    data = constructed_data()
    samples = sequence_prefixes(data, MAX_LEN)
    batches = list(prefix_batches(data, samples, 4, np.random.default_rng(3)))
    assert [len(b["target"]) for b in batches] == [4, 4, 4, 2]  # 14 samples, RecBole-sized batches
    seen = sorted((int(u), tuple(int(x) for x in s[:n]), int(t)) for b in batches
                  for u, s, n, t in zip(b["users"], b["seq"], b["seq_len"], b["target"]))
    assert seen == sorted(recbole_pairs(data.train_users, data.train_items, MAX_LEN))
    assert all(b["seq"].shape[1] == int(b["seq_len"].max()) for b in batches)
    assert all(((1 <= b["neg"]) & (b["neg"] < data.n_items)).all() for b in batches)
    again = list(prefix_batches(data, samples, 4, np.random.default_rng(3)))
    assert all(torch.equal(a["target"], b["target"]) for a, b in zip(batches, again))  # seeded


def test_prefix_samples_are_the_default(tiny_data):
    for name in ("gru4rec", "sasrec"):
        cfg = model_config({"name": name, "max_seq_len": 4})
        assert cfg.train_samples == "prefix" and cfg.training_protocol()["train_samples"] == "prefix"
        model = build_model(cfg, tiny_data)
        batches = list(model.training_batches(tiny_data, 16, np.random.default_rng(0)))
        total = sum(len(s) - 1 for s in tiny_data.train_sequences() if len(s) > 1)
        assert sum(len(b["target"]) for b in batches) == total and len(batches) == -(-total // 16)


# sha256 of the training batches of the windows built before prefix samples existed (commit bf32954's
# sequence_windows + sequence_batches; tiny_data, max_len 4, batch_size 16, default_rng(7)), strides 1 and null
WINDOW_BATCHES_DIGEST = "d29c5a7d59d2c24c4905c6134423419fd747f21ad82ba2ba24797bae932495b8"


def test_windows_option_reproduces_the_packed_windows(tiny_data):
    digest = hashlib.sha256()
    for stride in (1, None):
        cfg = model_config({"name": "sasrec", "max_seq_len": 4, "train_samples": "windows", "train_stride": stride})
        assert cfg.training_protocol()["train_samples"] == "windows"
        for batch in build_model(cfg, tiny_data).training_batches(tiny_data, 16, np.random.default_rng(7)):
            for key in sorted(batch):
                digest.update(key.encode())
                digest.update(batch[key].numpy().tobytes())
    assert digest.hexdigest() == WINDOW_BATCHES_DIGEST


def test_train_stride_belongs_to_windows():
    with pytest.raises(ConfigError, match="train_stride.*train_samples: windows"):
        model_config({"name": "gru4rec", "train_stride": None})
    assert model_config({"name": "gru4rec", "train_samples": "windows", "train_stride": None}).train_stride is None


@pytest.mark.parametrize("name", ["gru4rec", "sasrec"])
def test_trimmed_encodings_give_the_padded_batchs_outputs_and_loss(name, tiny_data):
    seed_everything(0)
    model = build_model(model_config({"name": name, "max_seq_len": 4}), tiny_data)
    batch = next(iter(model.training_batches(tiny_data, 64, np.random.default_rng(0))))
    assert batch["seq"].shape[1] == 4 and int(batch["seq_len"].min()) == 1
    model.eval()
    with torch.no_grad():
        padded = last_position(model._encode(batch["seq"]), batch["seq_len"])
        grouped = last_outputs(model._encode, batch["seq"], batch["seq_len"], rows=5)
        torch.testing.assert_close(grouped, padded, rtol=1e-5, atol=1e-5)
        logits = padded @ model.item_emb.weight.T
        logits[:, 0] = -torch.inf
        want = torch.nn.functional.cross_entropy(logits, batch["target"])
        torch.testing.assert_close(model.calculate_loss(batch), want, rtol=1e-5, atol=1e-5)
