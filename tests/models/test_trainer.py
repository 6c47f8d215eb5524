"""The shared trainer: early stopping, best-epoch checkpoint, resume, non-gradient models, exports."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from llmrec.errors import ConfigError
from llmrec.models.base import build_model, model_config
from llmrec.models.evaluation import EvalConfig, evaluate
from llmrec.models.export import export_embeddings, export_topk
from llmrec.models.trainer import TrainerConfig, fit, load_checkpoint, seed_everything


def cfg(**kw):
    base = dict(epochs=6, batch_size=32, learning_rate=0.05, patience=2, device="cpu", eval=EvalConfig(topk=[5, 10]))
    return TrainerConfig(**{**base, **kw})


def test_fit_keeps_best_epoch_and_checkpoint_reloads_it(tiny_data, tmp_path):
    model = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    rows = []
    result = fit(model, tiny_data, cfg(), tmp_path / "ckpt", on_epoch=lambda row, ck: rows.append((row, ck)))
    best_row = max((r for r, _ in rows), key=lambda r: r["valid/ndcg@10"])
    assert result.best_epoch == best_row["epoch"]
    assert result.best_valid["valid/ndcg@10"] == pytest.approx(best_row["valid/ndcg@10"])
    assert [ck is not None for _, ck in rows].count(True) >= 1 and result.checkpoint.is_file()
    # the model holds the best weights: re-evaluating gives the best validation score
    again = evaluate(model, tiny_data, "valid", cfg().eval).metrics["ndcg@10"]
    assert again == pytest.approx(best_row["valid/ndcg@10"])
    fresh = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    state = load_checkpoint(fresh, tmp_path / "ckpt")
    assert state["epoch"] == result.best_epoch
    assert torch.equal(fresh.user_emb.weight, model.user_emb.weight)


def test_early_stopping_stops_after_patience(tiny_data):
    model = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    result = fit(model, tiny_data, cfg(epochs=40, learning_rate=0.5, patience=1))
    last = result.history[-1]["epoch"]
    assert last < 39 and last == result.best_epoch + 1


def test_resume_continues_after_the_last_epoch(tiny_data, tmp_path):
    first = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    fit(first, tiny_data, cfg(epochs=2, patience=5), tmp_path / "ck")
    last = torch.load(tmp_path / "ck" / "last.pt", weights_only=True)
    assert last["state"]["last_epoch"] == 1 and {"numpy", "torch", "python"} <= set(last["rng"])
    second = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    seen = []
    result = fit(second, tiny_data, cfg(epochs=4, patience=5), tmp_path / "ck", lambda row, ck: seen.append(row),
                 resume=tmp_path / "ck")
    assert [r["epoch"] for r in result.history] == [2, 3]
    # the last saved epoch is reported again first (an interruption may have cut its report), then the new ones
    assert seen[0] == last["state"]["last_row"] and [r["epoch"] for r in seen] == [1, 2, 3]


@pytest.mark.parametrize("name", ["bprmf", "gru4rec"])
def test_an_interrupted_run_resumed_equals_the_uninterrupted_run(name, tiny_data, tmp_path):
    """Issue 16: resume restores the last epoch's weights, optimizer, early-stopping counters and RNG."""
    model_cfg = {"name": name, "embedding_size": 8} if name == "bprmf" else {"name": name, "embedding_size": 8,
                                                                              "hidden_size": 8, "max_seq_len": 5}
    seed_everything(3)
    straight = build_model(model_config(model_cfg), tiny_data)
    whole = fit(straight, tiny_data, cfg(epochs=4, patience=5, seed=3), tmp_path / "a")
    seed_everything(3)
    part = build_model(model_config(model_cfg), tiny_data)
    fit(part, tiny_data, cfg(epochs=2, patience=5, seed=3), tmp_path / "b")
    resumed = build_model(model_config(model_cfg), tiny_data)
    rest = fit(resumed, tiny_data, cfg(epochs=4, patience=5, seed=3), tmp_path / "b", resume=tmp_path / "b")
    assert [r["loss"] for r in rest.history] == pytest.approx([r["loss"] for r in whole.history[2:]], abs=0)
    assert rest.best_epoch == whole.best_epoch and rest.best_valid == pytest.approx(whole.best_valid)
    for (k, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k


def test_resume_keeps_the_early_stopping_counter(tiny_data, tmp_path):
    model = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    fit(model, tiny_data, cfg(epochs=3, patience=5), tmp_path / "ck")
    ck = torch.load(tmp_path / "ck" / "last.pt", weights_only=True)
    ck["state"]["bad"] = 5  # patience already used up when the run was cut
    torch.save(ck, tmp_path / "ck" / "last.pt")
    again = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    result = fit(again, tiny_data, cfg(epochs=10, patience=5), tmp_path / "ck", resume=tmp_path / "ck")
    assert result.history == []  # it stopped before training another epoch


def test_a_tie_counts_as_an_improvement(tiny_data):
    """RecBole's early stopping: value >= best resets the counter, so a plateau keeps the later epoch."""
    model = build_model(model_config({"name": "mostpop"}), tiny_data)
    model.trainable = True  # constant scores: every validation ties
    model.training_batches = lambda data, bs, rng: iter([{}])
    model.calculate_loss = lambda batch: torch.zeros((), requires_grad=True)
    model.register_parameter("w", torch.nn.Parameter(torch.zeros(1)))
    model.fit(tiny_data)
    result = fit(model, tiny_data, cfg(epochs=4, patience=1))
    assert [r["epoch"] for r in result.history] == [0, 1, 2, 3] and result.best_epoch == 3


def test_seeded_training_is_reproducible(tiny_data):
    scores = []
    for _ in range(2):
        seed_everything(5)  # model init is seeded by the caller, batches by fit()
        model = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
        scores.append(fit(model, tiny_data, cfg(epochs=2, seed=5)).best_valid["valid/ndcg@10"])
    assert scores[0] == scores[1]


def test_non_gradient_model_evaluates_once(tiny_data):
    model = build_model(model_config({"name": "mostpop"}), tiny_data)
    result = fit(model, tiny_data, cfg())
    assert result.best_epoch == 0 and len(result.history) == 1 and "valid/hr@10" in result.best_valid


def test_unknown_metric_and_missing_gpu_fail_before_training(tiny_data):
    model = build_model(model_config({"name": "mostpop"}), tiny_data)
    with pytest.raises(ConfigError, match="train.metric='ndcg@50' is not computed"):
        fit(model, tiny_data, cfg(metric="ndcg@50"))
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            fit(model, tiny_data, cfg(device="cuda"))


def test_learning_beats_popularity_on_clustered_data(tiny_sampled):
    pop = fit(build_model(model_config({"name": "mostpop"}), tiny_sampled), tiny_sampled, cfg())
    bpr = fit(
        build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_sampled),
        tiny_sampled,
        cfg(epochs=15, patience=15),
    )
    assert bpr.best_valid["valid/ndcg@5"] > pop.best_valid["valid/ndcg@5"]


def test_export_topk_and_embeddings(tiny_data, tmp_path):
    model = build_model(model_config({"name": "bprmf", "embedding_size": 8}), tiny_data)
    fit(model, tiny_data, cfg(epochs=1))
    path = export_topk(model, tiny_data, "test", 5, tmp_path / "topk.parquet")
    top = pd.read_parquet(path)
    assert list(top.columns) == ["user_id", "rank", "item_id", "score"]
    assert len(top) == 5 * len(tiny_data.test.users) and top.groupby("user_id")["rank"].max().eq(5).all()
    history = {
        tiny_data.user_ids[u]: set(tiny_data.item_ids[h]) for u, h in zip(tiny_data.test.users, tiny_data.test.history)
    }
    assert not any(item in history[user] for user, item in zip(top["user_id"], top["item_id"]))
    assert (top.groupby("user_id")["score"].diff().dropna() <= 0).all()
    paths = export_embeddings(model, tiny_data, tmp_path / "emb")
    users = pd.read_parquet(paths["user_embeddings"])
    items = pd.read_parquet(paths["item_embeddings"])
    assert len(users) == tiny_data.n_users and len(items) == tiny_data.n_items - 1 and len(users["embedding"][0]) == 8
    assert export_embeddings(build_model(model_config({"name": "mostpop"}), tiny_data), tiny_data, tmp_path / "x") == {}
