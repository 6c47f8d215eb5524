"""Integer-encoded interactions for the models: ids, histories and training batches.

Item index 0 is padding (sequence models and masks rely on it); users are 0..n_users-1.
Histories are time-ordered (file order on ties). ``RecData`` is plain numpy, so Ray can
put one copy in the object store for all trials of a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from llmrec.interactions.config import CandidateConfig
from llmrec.interactions.schema import ITEM_ID, TIMESTAMP, USER_ID
from llmrec.interactions.splits import Split, sample_negatives


@dataclass
class EvalSet:
    """Evaluated users of one phase: positives, the history to mask/feed, optional negatives."""

    users: np.ndarray
    positives: list[np.ndarray]
    history: list[np.ndarray]
    negatives: np.ndarray | None = None


@dataclass
class RecData:
    """Encoded split: vocabularies, time-ordered train arrays and the valid/test sets."""

    user_ids: np.ndarray
    item_ids: np.ndarray
    train_users: np.ndarray
    train_items: np.ndarray
    valid: EvalSet
    test: EvalSet
    known_users: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    known_items: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    titles: list[str] = field(default_factory=list)
    protocol: dict = field(default_factory=dict)
    train_keys: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        """Number of item indices, padding (0) included."""
        return len(self.item_ids)

    def phase(self, name: str) -> EvalSet:
        """The ``valid`` or ``test`` set."""
        if name not in ("valid", "test"):
            raise ValueError(f"phase must be 'valid' or 'test', got {name!r}")
        return self.valid if name == "valid" else self.test

    def train_sequences(self) -> list[np.ndarray]:
        """Each user's time-ordered train items (index = user)."""
        return _group(self.train_users, self.train_items, self.n_users)

    def histories(self, phase: str) -> list[np.ndarray]:
        """Every user's history when scoring ``phase``: train (valid) or train+valid (test)."""
        if phase == "valid":
            return self.train_sequences()
        self.phase(phase)
        return _group(self.known_users, self.known_items, self.n_users)

    def item_popularity(self) -> np.ndarray:
        """Train interaction count per item index."""
        return np.bincount(self.train_items, minlength=self.n_items)


def _group(users: np.ndarray, items: np.ndarray, n_users: int) -> list[np.ndarray]:
    order = np.argsort(users, kind="stable")
    bounds = np.searchsorted(users[order], np.arange(n_users + 1))
    sorted_items = items[order]
    return [sorted_items[bounds[u] : bounds[u + 1]] for u in range(n_users)]


def _time_sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values([USER_ID, TIMESTAMP], kind="stable", na_position="last")


def encode(split: Split, titles: dict[str, str] | None = None, candidates: CandidateConfig | None = None) -> RecData:
    """Encode a split: every user/item of any phase gets an index (items from 1)."""
    frames = [split.train, split.valid, split.test]
    every = pd.concat(frames)
    user_ids = np.array(sorted(every[USER_ID].unique()), dtype=object)
    item_ids = np.array(["<pad>", *sorted(every[ITEM_ID].unique())], dtype=object)
    uix = {u: k for k, u in enumerate(user_ids)}
    iix = {i: k for k, i in enumerate(item_ids)}
    train = _time_sorted(split.train)
    tu = train[USER_ID].map(uix).to_numpy(np.int64)
    ti = train[ITEM_ID].map(iix).to_numpy(np.int64)
    n_users = len(user_ids)
    train_hist = _group(tu, ti, n_users)
    valid_set = _eval_set(split.valid, uix, iix, train_hist)
    known = pd.concat([split.train, split.valid])
    kt = _time_sorted(known)
    ku, ki = kt[USER_ID].map(uix).to_numpy(np.int64), kt[ITEM_ID].map(iix).to_numpy(np.int64)
    test_hist = _group(ku, ki, n_users)
    test_set = _eval_set(split.test, uix, iix, test_hist)
    if candidates is not None and candidates.mode == "sampled":
        for name, es in (("valid", valid_set), ("test", test_set)):
            neg = sample_negatives(split, name, candidates.num_negatives, candidates.seed, candidates.sampler)
            neg_map = dict(zip(neg[USER_ID], neg["negatives"]))
            es.negatives = np.array([[iix[i] for i in neg_map[user_ids[u]]] for u in es.users], dtype=np.int64).reshape(
                len(es.users), candidates.num_negatives
            )
    title_of = titles or {}
    names = [""] + [str(title_of.get(i, "")) for i in item_ids[1:]]
    return RecData(user_ids, item_ids, tu, ti, valid_set, test_set, ku, ki, names, dict(split.protocol))


def _eval_set(frame: pd.DataFrame, uix: dict, iix: dict, history: list[np.ndarray]) -> EvalSet:
    frame = _time_sorted(frame)
    eu = frame[USER_ID].map(uix).to_numpy(np.int64)
    ei = frame[ITEM_ID].map(iix).to_numpy(np.int64)
    users = np.unique(eu)
    grouped = _group(eu, ei, max(len(history), 1))
    return EvalSet(users, [grouped[u] for u in users], [history[u] for u in users])


# --- training batches --------------------------------------------------------------------


def _is_train_pair(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    pos = np.searchsorted(keys, query).clip(max=len(keys) - 1)
    return keys[pos] == query


def sample_negative_items(data: RecData, users: np.ndarray, rng: np.random.Generator, num: int = 1) -> np.ndarray:
    """``[len(users), num]`` items drawn uniformly from 1..n_items-1 outside each user's train set."""
    if data.train_keys is None or len(data.train_keys) == 0:
        data.train_keys = np.unique(data.train_users * data.n_items + data.train_items)
    base = users[:, None] * data.n_items
    neg = rng.integers(1, data.n_items, size=(len(users), num))
    hit = _is_train_pair(data.train_keys, base + neg)
    for _ in range(100):
        if not hit.any():
            break
        neg[hit] = rng.integers(1, data.n_items, size=int(hit.sum()))
        hit[hit] = _is_train_pair(data.train_keys, (base + neg)[hit])
    return neg


def pairwise_batches(
    data: RecData, batch_size: int, rng: np.random.Generator, num_neg: int = 1
) -> Iterator[dict[str, torch.Tensor]]:
    """Shuffled (user, positive item, negatives ``[B, num_neg]``) batches over all train interactions."""
    order = rng.permutation(len(data.train_users))
    neg = sample_negative_items(data, data.train_users[order], rng, num_neg)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        yield {
            "users": torch.from_numpy(data.train_users[idx]),
            "pos": torch.from_numpy(data.train_items[idx]),
            "neg": torch.from_numpy(neg[start : start + batch_size]),
        }


def pad_sequences(seqs: list[np.ndarray], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[B, max_len]`` of each sequence's last ``max_len`` items, and the lengths."""
    out = np.zeros((len(seqs), max_len), dtype=np.int64)
    lens = np.zeros(len(seqs), dtype=np.int64)
    for k, s in enumerate(seqs):
        s = s[-max_len:]
        out[k, : len(s)] = s
        lens[k] = len(s)
    return torch.from_numpy(out), torch.from_numpy(lens)


@dataclass
class PrefixSamples:
    """RecBole's sequential training samples: one per train item after a user's first.

    Sample ``j`` predicts ``items[ends[j]]`` (of user ``users[j]``) from the ``lens[j]`` items just
    before it in that user's time-ordered history: ``items[ends[j] - lens[j] : ends[j]]``, at most
    ``max_len`` of them. ``items`` holds every user's train items, user after user.
    """

    items: np.ndarray
    ends: np.ndarray
    lens: np.ndarray
    users: np.ndarray

    def __len__(self) -> int:
        return len(self.ends)

    def inputs(self, idx: np.ndarray) -> np.ndarray:
        """``[len(idx), longest]`` prefixes of samples ``idx``, left-aligned and right-padded with 0."""
        lens = self.lens[idx]
        cols = np.arange(int(lens.max()) if len(idx) else 0)
        pos = (self.ends[idx] - lens)[:, None] + cols
        return np.where(cols < lens[:, None], self.items[np.minimum(pos, len(self.items) - 1)], 0)


def sequence_prefixes(data: RecData, max_len: int) -> PrefixSamples:
    """Every train item after a user's first is the target of its own sample, whose input is the
    ``max_len`` items before it (fewer near the start): RecBole's sequential data augmentation."""
    seqs = data.train_sequences()
    sizes = np.array([len(s) for s in seqs], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    counts = np.maximum(sizes - 1, 0)
    users = np.repeat(np.arange(len(seqs), dtype=np.int64), counts)
    # each target's position in its user's history: 1 .. size - 1
    within = np.arange(len(users), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts) + 1
    items = np.concatenate(seqs).astype(np.int64) if seqs else np.zeros(0, np.int64)
    return PrefixSamples(items, starts[users] + within, np.minimum(within, max_len), users)


def prefix_batches(
    data: RecData, samples: PrefixSamples, batch_size: int, rng: np.random.Generator
) -> Iterator[dict[str, torch.Tensor]]:
    """Shuffled batches of ``batch_size`` prefix samples (``seq``, ``target``, ``seq_len``, ``neg``), as
    RecBole's shuffled training loader; ``seq`` is padded to the batch's longest prefix, not ``max_len``."""
    order = rng.permutation(len(samples))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        yield {
            "users": torch.from_numpy(samples.users[idx]),
            "seq": torch.from_numpy(samples.inputs(idx)),
            "target": torch.from_numpy(samples.items[samples.ends[idx]]),
            "seq_len": torch.from_numpy(samples.lens[idx]),
            "neg": torch.from_numpy(rng.integers(1, data.n_items, size=len(idx))),
        }


def sequence_windows(
    data: RecData, max_len: int, stride: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Next-item training windows: every train item after a user's first is a target once.

    Returns inputs ``[N, max_len]``, targets ``[N, max_len]`` (0 = no target at that position)
    and users ``[N]``. Windows of ``max_len + 1`` items end at the user's last item and step back
    by ``stride`` (default ``max_len``: consecutive windows). A window counts its last ``stride``
    targets (the earliest window all that remain), so each target sees at least
    ``max_len - stride + 1`` items of context (all earlier items near the start of a history);
    ``stride=1`` makes every target the last position of its own window, which is RecBole's
    prefix augmentation.
    """
    stride = max_len if stride is None else stride
    if not 1 <= stride <= max_len:
        raise ValueError(f"stride must be in [1, max_len={max_len}], got {stride}")
    inputs, targets, users = [], [], []
    for u, seq in enumerate(data.train_sequences()):
        end, counted_from = len(seq), len(seq)  # targets at positions >= counted_from are counted
        while counted_from > 1:
            start = max(0, end - max_len - 1)
            window = seq[start:end]
            row_in = np.zeros(max_len, dtype=np.int64)
            row_tg = np.zeros(max_len, dtype=np.int64)
            row_in[: len(window) - 1] = window[:-1]
            # A window counts its last `stride` targets (the earliest window: all that are left);
            # the target at absolute position p sits at column p - start - 1.
            lo = start + 1 if start == 0 else max(start + 1, end - stride)
            row_tg[lo - start - 1 : counted_from - start - 1] = seq[lo:counted_from]
            inputs.append(row_in)
            targets.append(row_tg)
            users.append(u)
            counted_from = lo
            end -= stride
    if not inputs:
        z = np.zeros((0, max_len), dtype=np.int64)
        return z, z, np.zeros(0, dtype=np.int64)
    return np.stack(inputs), np.stack(targets), np.array(users, dtype=np.int64)


def sequence_batches(
    data: RecData,
    max_len: int,
    batch_size: int,
    rng: np.random.Generator,
    windows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Shuffled batches of ``sequence_windows`` (``seq``, ``target``, ``seq_len``, ``neg``).

    ``batch_size`` counts next-item targets, as RecBole's batches of prefixes do: windows are
    taken in shuffled order until the batch holds ``batch_size`` targets (a window is never split).
    """
    inputs, targets, users = windows if windows is not None else sequence_windows(data, max_len)
    order = rng.permutation(len(inputs))
    lens = (inputs > 0).sum(axis=1)
    counted = np.cumsum((targets[order] > 0).sum(axis=1))
    total = int(counted[-1]) if len(counted) else 0
    cuts = np.searchsorted(counted, np.arange(batch_size, total, batch_size), side="left") + 1
    bounds = np.unique(np.concatenate([[0], cuts, [len(order)]]))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx = order[lo:hi]
        neg = rng.integers(1, data.n_items, size=targets[idx].shape)
        yield {
            "users": torch.from_numpy(users[idx]),
            "seq": torch.from_numpy(inputs[idx]),
            "target": torch.from_numpy(targets[idx]),
            "seq_len": torch.from_numpy(lens[idx]),
            "neg": torch.from_numpy(neg),
        }
