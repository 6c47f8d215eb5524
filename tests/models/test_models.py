"""Every model: registry, config defaults, score shapes, and one epoch lowers the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llmrec.errors import ConfigError
from llmrec.models.base import MODELS, build_model, model_config
from llmrec.models.data import pad_sequences
from llmrec.models.trainer import seed_everything, train_epoch

GRADIENT_MODELS = {
    "bprmf": {"embedding_size": 16},
    "neumf": {"mf_embedding_size": 8, "mlp_embedding_size": 8, "mlp_hidden_size": [16, 8]},
    "lightgcn": {"embedding_size": 16, "n_layers": 2},
    "gru4rec": {"embedding_size": 16, "hidden_size": 16, "max_seq_len": 8},
    "sasrec": {"hidden_size": 16, "n_heads": 2, "inner_size": 32, "max_seq_len": 8, "dropout": 0.1},
    "sasrec_bce": {
        "name": "sasrec",
        "hidden_size": 16,
        "n_heads": 2,
        "inner_size": 32,
        "max_seq_len": 8,
        "loss": "bce",
    },
}


def test_registry_lists_every_paper_model_and_rejects_unknown():
    assert MODELS.names() == ["bm25", "bprmf", "gru4rec", "lightgcn", "mostpop", "neumf", "sasrec"]
    with pytest.raises(ConfigError, match="Unknown model 'bpr'. Available: bm25, bprmf"):
        model_config({"name": "bpr"})
    with pytest.raises(ConfigError, match="unknown key 'model.embedding_dim'"):
        model_config({"name": "BPRMF", "embedding_dim": 8})
    assert model_config({"name": "BPRMF"}).embedding_size == 64


def score(model, data, users):
    seq, lens = pad_sequences([data.train_sequences()[u] for u in users], model.max_seq_len)
    model.eval()
    model.prepare_eval(data.histories("valid"))
    with torch.no_grad():
        return model.full_scores(torch.tensor(users), seq, lens)


@pytest.mark.parametrize("key", sorted(GRADIENT_MODELS))
def test_shapes_and_one_epoch_lowers_the_loss(key, tiny_data):
    params = GRADIENT_MODELS[key]
    cfg = model_config({"name": params.get("name", key), **{k: v for k, v in params.items() if k != "name"}})
    rng = seed_everything(0)
    model = build_model(cfg, tiny_data)
    out = score(model, tiny_data, [0, 3, 5])
    assert out.shape == (3, tiny_data.n_items) and torch.isfinite(out).all()
    batch = next(iter(model.training_batches(tiny_data, 10_000, np.random.default_rng(1))))
    model.train()
    with torch.no_grad():
        before = float(model.calculate_loss(batch))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(3):
        train_epoch(model, tiny_data, 32, rng, opt, torch.device("cpu"))
    model.train()
    torch.manual_seed(0)
    with torch.no_grad():
        after = float(model.calculate_loss(batch))
    assert after < before


@pytest.mark.parametrize("name, dim", [("bprmf", 16), ("neumf", 16), ("lightgcn", 16)])
def test_embeddings_have_one_row_per_user_and_item(name, dim, tiny_data):
    params = {
        "bprmf": {"embedding_size": 16},
        "neumf": {"mf_embedding_size": 8, "mlp_embedding_size": 8},
        "lightgcn": {"embedding_size": 16},
    }[name]
    users, items = build_model(model_config({"name": name, **params}), tiny_data).embeddings()
    assert users.shape == (tiny_data.n_users, dim) and items.shape == (tiny_data.n_items, dim)


def test_mostpop_scores_train_counts(tiny_data):
    model = build_model(model_config({"name": "mostpop"}), tiny_data)
    model.fit(tiny_data)
    out = score(model, tiny_data, [0, 1])
    counts = np.bincount(tiny_data.train_items, minlength=tiny_data.n_items)
    assert torch.equal(out[0], torch.tensor(counts, dtype=torch.float32)) and torch.equal(out[0], out[1])


def test_bm25_prefers_items_whose_titles_match_the_history(tiny_data):
    model = build_model(model_config({"name": "bm25"}), tiny_data)
    model.fit(tiny_data)
    space = [k for k, t in enumerate(tiny_data.titles) if t.startswith("space")]
    love = [k for k, t in enumerate(tiny_data.titles) if t.startswith("love")]
    u0, u1 = (list(tiny_data.user_ids).index(u) for u in ("u0", "u1"))  # u0 likes "space", u1 "love"
    scores = score(model, tiny_data, [u0, u1])
    assert scores.shape == (2, tiny_data.n_items)
    assert scores[0, space].mean() > scores[0, love].mean()
    assert scores[1, love].mean() > scores[1, space].mean()


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_batched_scores_equal_bm25s_per_query_scores(tiny_data, method):
    """The sparse batched product gives exactly what bm25s.get_scores gives title by title."""
    import bm25s

    from llmrec.models.bm25 import tokenize

    data = tiny_data
    data.titles[1] = "space space odyssey"  # a repeated token counts twice in bm25s
    model = build_model(model_config({"name": "bm25", "method": method}), data)
    model.fit(data)
    histories = data.train_sequences()
    corpus = [[t for i in h for t in tokenize(data.titles[i])] or ["<empty>"] for h in histories]
    index = bm25s.BM25(k1=1.5, b=0.75, method=method)
    index.index(corpus, show_progress=False)
    expected = np.zeros((len(histories), data.n_items), dtype=np.float32)
    for item in range(1, data.n_items):
        toks = tokenize(data.titles[item])
        if toks:
            expected[:, item] = index.get_scores(toks)
    users = list(range(len(histories)))[::-1]  # any order, any subset
    got = score(model, data, users).numpy()
    np.testing.assert_allclose(got, expected[users], rtol=1e-5, atol=1e-6)


def test_bm25_needs_titles(tiny_split):
    from llmrec.models.data import encode

    with pytest.raises(ConfigError, match="bm25 needs item titles"):
        build_model(model_config({"name": "bm25"}), encode(tiny_split))


def test_batch_size_counts_training_examples(tiny_data):
    rng = np.random.default_rng(0)
    neumf = build_model(model_config({"name": "neumf", "num_negatives": 3}), tiny_data)
    batch = next(iter(neumf.training_batches(tiny_data, 40, rng)))
    assert batch["pos"].shape == (10,) and batch["neg"].shape == (10, 3)
    sasrec = build_model(
        model_config({"name": "sasrec", "max_seq_len": 4, "hidden_size": 8, "inner_size": 8, "train_samples": "windows"}),
        tiny_data,
    )
    batches = list(sasrec.training_batches(tiny_data, 16, rng))
    counts = [int((b["target"] > 0).sum()) for b in batches]
    total = sum(len(s) - 1 for s in tiny_data.train_sequences() if len(s) > 1)
    # as many steps as RecBole's batches of 16 prefixes; a window (<= 4 targets) is never split
    assert sum(counts) == total and len(batches) == -(-total // 16)
    assert all(16 - 4 < n < 16 + 4 for n in counts[:-1])
    assert np.all(np.cumsum(counts)[:-1] >= 16 * np.arange(1, len(counts)))


@pytest.mark.parametrize("stride", [None, 3, 2, 1])
def test_sequence_windows_make_every_later_train_item_a_target_once(tiny_data, stride):
    from llmrec.models.data import sequence_windows

    max_len = 3
    inputs, targets, users = sequence_windows(tiny_data, max_len, stride)
    seqs = tiny_data.train_sequences()
    got = sorted((int(u), int(t)) for u, row in zip(users, targets) for t in row if t)
    want = sorted((u, int(i)) for u, seq in enumerate(seqs) for i in seq[1:])
    assert got == want
    context = max_len - (stride or max_len) + 1
    checked = 0
    for u, row_in, row_tg in zip(users, inputs, targets):
        seq = list(seqs[u])
        for col in np.flatnonzero(row_tg):
            if seq.count(row_tg[col]) != 1:
                continue
            pos = seq.index(row_tg[col])
            # the target's inputs are the items just before it in the history, in order
            assert list(row_in[: col + 1]) == seq[pos - col - 1 : pos]
            # it sees at least max_len - stride + 1 of them (all of them near the start);
            # stride 1 gives every target its full context, as RecBole's prefixes do
            assert col + 1 >= min(pos, context)
            if stride == 1:
                assert col + 1 == min(pos, max_len)
            checked += 1
    assert checked > 10


def test_train_stride_is_validated():
    with pytest.raises(ConfigError, match="train_stride"):
        model_config({"name": "sasrec", "max_seq_len": 4, "train_samples": "windows", "train_stride": 5})


def test_lightgcn_propagation_matches_torch_geometric_and_its_gradient(tiny_data):
    model = build_model(model_config({"name": "lightgcn", "embedding_size": 8, "n_layers": 3}), tiny_data)
    ours = model._propagate()
    reference = model.gcn.get_embedding(model.adj)
    assert torch.allclose(ours, reference, atol=1e-6)
    weights = torch.randn_like(ours)
    (grad_ours,) = torch.autograd.grad((ours * weights).sum(), model.gcn.embedding.weight)
    (grad_ref,) = torch.autograd.grad((model.gcn.get_embedding(model.adj) * weights).sum(), model.gcn.embedding.weight)
    assert torch.allclose(grad_ours, grad_ref, atol=1e-5)
