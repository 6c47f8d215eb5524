"""PerRecBench metrics: PTC as the reference computes it, plus ``ptc_rank``, exact match and
pointwise MAE/RMSE; the ``llmrec score perrecbench`` contract.

Orderings. An *ordering list* gives, position by position, the 1-based index of a user,
most preferred first. From values (relative-rating labels, or point scores = predicted
rating − average rating, in float64) it is built as the reference builds it:
``argsort`` ascending, +1, reversed — so among equal values the HIGHER user index comes
first. The sort is stable (``kind="stable"``), which is what the reference's numpy
default amounts to for groups of up to 16 users.

- ``ptc``: ``scipy.stats.kendalltau`` (tau-b) between the predicted and the label
  ORDERING LISTS, as the reference's ``evaluate_single.py``.
- ``ptc_rank``: standard Kendall tau-b between RANK VECTORS (rank of user u = 1-based
  position of its first occurrence in the ordering; users absent from it share rank n+1).
- ``exact_match``: the predicted ordering equals the label ordering.
For two users the three agree; from three users on ``ptc`` and ``ptc_rank`` differ (see
README): the ordering-list tau compares user *indices* position by position.

Ties. A prediction *has ties* when it does not order every two users: point scores that are
equal or two users given the same rating, a list that names a user twice (so another not at
all), a pair of users the pairwise model preferred in neither prompt order. The reference breaks
them by position (the higher index first; the heapsort's order) or, for equal ratings, by the
users' average ratings, so a constant predictor scores ±1 on a group by how its users happen to
be numbered or by who rates low on average. Every line reports ``ties`` (counted as ``n_tied`` / ``tied_share``);
``ties="aware"`` scores each metric as its expected value over every order the ties could be
broken in (uniformly): a tied pair of users counts 0, a constant predictor scores 0. Lines
without ties score the same under both.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llmrec.errors import DataError
from llmrec.pipelines.common.jsonio import Id, PredictionLine

CONTRACT_MODES = ("point", "pair", "list")
TIES = ("reference", "aware")  # how tied predictions are scored: broken by position (the reference) or averaged


class ContractLine(PredictionLine):
    """A line of ``llmrec score perrecbench``: one group in one mode (the per-mode checks that need
    several fields at once are ``check_line``'s)."""

    unique = ("group_id", "mode")
    group_id: Id
    mode: Literal["point", "pair", "list"]
    relative_ratings: list[float] = Field(min_length=2)
    avg_ratings: list[float] = Field(min_length=2)
    ratings: list[float] | None = None
    prediction: list[float | None] | None  # point: predicted ratings; pair/list: user indices 1..n
    # the group, for reports (not scored); with the fields above, in this order, the lines a run writes
    level: str | None = None
    item_id: Id | None = None
    user_ids: list[Id] | None = None
    item_avg_ratings: list[float] | None = None
    tied_pairs: list[list[int]] | None = None  # pair mode: user pairs (1-based) preferred in neither prompt order


def ordering_from_values(values: Sequence[float]) -> list[int]:
    """Ordering list (1-based user indices, highest value first; ties: higher index first)."""
    order = np.argsort(np.asarray(values, dtype=np.float64), kind="stable") + 1
    return [int(i) for i in order[::-1]]


def ranks_from_ordering(ordering: Sequence[int], n: int) -> list[int]:
    """Rank of each user 1..n: position of its first occurrence; absent users share n+1."""
    ranks = [n + 1] * n
    for pos, user in enumerate(ordering, start=1):
        if 1 <= user <= n and ranks[user - 1] == n + 1:
            ranks[user - 1] = pos
    return ranks


def _tau(x: Sequence[float], y: Sequence[float]) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: NaN, reported by the caller
        from scipy import stats  # imported here: ~1 s that Ray workers need not pay

        return float(stats.kendalltau(x, y).statistic)


def ptc(pred_ordering: Sequence[int], label_ordering: Sequence[int]) -> float:
    """Kendall tau-b between the two ordering lists (the reference's PTC)."""
    return _tau(pred_ordering, label_ordering)


def ptc_rank(pred_ordering: Sequence[int], label_ordering: Sequence[int]) -> float:
    """Kendall tau-b between the rank vectors the two orderings induce."""
    n = len(label_ordering)
    return _tau(ranks_from_ordering(pred_ordering, n), ranks_from_ordering(label_ordering, n))


def point_ordering(predicted: Sequence[float], avg_ratings: Sequence[float]) -> list[int]:
    """Point mode: order users by predicted rating − average rating."""
    return ordering_from_values(np.asarray(predicted, np.float64) - np.asarray(avg_ratings, np.float64))


def prediction_ordering(mode: str, prediction, avg_ratings: Sequence[float]) -> list[int] | None:
    """The predicted ordering of a line, or None when the prediction is unusable."""
    if prediction is None:
        return None
    if mode == "point":
        return None if any(p is None for p in prediction) else point_ordering(prediction, avg_ratings)
    return [int(i) for i in prediction]


def value_tiers(values: Sequence[float]) -> list[list[int]]:
    """1-based users grouped by equal value, highest value first (within a tier: the reference's order)."""
    v = np.asarray(values, dtype=np.float64)
    tiers: list[list[int]] = []
    for u in ordering_from_values(v):
        if tiers and v[tiers[-1][0] - 1] == v[u - 1]:
            tiers[-1].append(u)
        else:
            tiers.append([u])
    return tiers


def prediction_tiers(mode: str, prediction, avg_ratings: Sequence[float], n: int,
                     tied_pairs: Iterable[Sequence[int]] | None = None) -> list[list[int]] | None:
    """The prediction as a weak order: tiers of users (1-based), best first; users in one tier are tied.
    Point: users by score, where neighbours of equal score or given the same rating share a tier (a model that
    rates every user alike leaves them all in one). List: users by first position, the users it never names
    tied last. Pair: the heapsort's ordering, where two users next to each other that neither won over the
    other share a tier."""
    if prediction is None:
        return None
    if mode == "point":
        if any(p is None for p in prediction):
            return None
        rating = np.asarray(prediction, np.float64)
        scores = rating - np.asarray(avg_ratings, np.float64)
        tiers = []
        for u in ordering_from_values(scores):  # neighbours of equal score or of the same predicted rating
            if tiers and (scores[tiers[-1][-1] - 1] == scores[u - 1] or rating[tiers[-1][-1] - 1] == rating[u - 1]):
                tiers[-1].append(u)
            else:
                tiers.append([u])
        return tiers
    order = [int(i) for i in prediction]
    if mode == "list":
        return value_tiers([-r for r in ranks_from_ordering(order, n)])
    tied = {frozenset(map(int, p)) for p in tied_pairs or ()}
    tiers: list[list[int]] = []
    for u in order:
        if tiers and frozenset((tiers[-1][-1], u)) in tied:
            tiers[-1].append(u)
        else:
            tiers.append([u])
    return tiers


def has_ties(mode: str, prediction, tiers: list[list[int]] | None,
             tied_pairs: Iterable[Sequence[int]] | None = None) -> bool:
    """The prediction leaves two users unordered (see the module docstring)."""
    if tiers is None:
        return False
    if mode == "list":
        return len(set(prediction)) < len(prediction) or any(len(t) > 1 for t in tiers)
    if mode == "pair":
        return bool(list(tied_pairs or ()))
    return len(set(prediction)) < len(prediction) or any(len(t) > 1 for t in tiers)  # a rating given twice


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def aware_scores(tiers: list[list[int]], label: Sequence[int]) -> dict[str, float]:
    """``ptc``, ``ptc_rank``, ``exact_match`` as expected values over the orders the tiers can be broken in
    (uniformly): ``label`` is the label ordering list (a permutation of 1..n)."""
    n = len(label)
    pairs = n * (n - 1) / 2
    slot = [t for t in tiers for _ in t]  # the tier at each position of the predicted ordering list
    tier_of = {u: i for i, t in enumerate(tiers) for u in t}
    # ordering lists: position pairs; the user at a position is uniform over its tier, so E[sign(x_i - x_j)] is 0
    # within one tier and the mean sign over the two tiers' users across tiers
    total = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            if slot[i] is slot[j]:
                continue
            e = sum(_sign(u - v) for u in slot[i] for v in slot[j]) / (len(slot[i]) * len(slot[j]))
            total += e * _sign(label[i] - label[j])
    label_rank = {u: pos for pos, u in enumerate(label)}
    rank_total = sum(_sign(tier_of[v] - tier_of[u]) * _sign(label_rank[v] - label_rank[u])
                     for u in range(1, n + 1) for v in range(u + 1, n + 1))
    exact = float(all(sorted(label[k:k + len(t)]) == sorted(t)
                      for k, t in zip(np.cumsum([0] + [len(t) for t in tiers[:-1]]), tiers)))
    exact /= math.prod(math.factorial(len(t)) for t in tiers)
    return {"ptc": total / pairs, "ptc_rank": rank_total / pairs, "exact_match": exact}


def score_line(line: dict, ties: str = "reference") -> dict:
    """Per-line fields: ``usable``, ``ptc``, ``ptc_rank``, ``exact_match`` (None when unusable) and ``ties``
    (the prediction leaves two users unordered). ``ties``: ``reference`` (ties broken by position, as the
    reference) or ``aware`` (each metric's expected value over the ways to break them)."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {list(TIES)}, got {ties!r}")
    label = ordering_from_values(line["relative_ratings"])
    pred = prediction_ordering(line["mode"], line["prediction"], line["avg_ratings"])
    if pred is None:
        return {"usable": False, "ptc": None, "ptc_rank": None, "exact_match": None, "ties": None}
    tiers = prediction_tiers(line["mode"], line["prediction"], line["avg_ratings"], len(label),
                             line.get("tied_pairs"))
    tied = has_ties(line["mode"], line["prediction"], tiers, line.get("tied_pairs"))
    if ties == "aware" and tied:
        return {"usable": True, **aware_scores(tiers, label), "ties": True}
    return {"usable": True, "ptc": ptc(pred, label), "ptc_rank": ptc_rank(pred, label),
            "exact_match": float(pred == label), "ties": tied}


class ScoreOptions(BaseModel):
    """``llmrec score perrecbench --option ties=aware``."""

    model_config = ConfigDict(extra="forbid")
    ties: Literal["reference", "aware"] = Field(
        "reference", description="reference: tied predictions broken by position, as the reference code; aware: "
        "each metric's expected value over every way to break the ties (a tied pair of users counts 0)")


def check_line(line: dict, where: str) -> None:
    """Raise DataError naming ``where`` when a contract line is malformed."""
    mode, n = line.get("mode"), len(line.get("relative_ratings") or [])
    if mode not in CONTRACT_MODES:
        raise DataError(f"{where}: mode must be one of {list(CONTRACT_MODES)}, got {mode!r}")
    if n < 2 or len(line.get("avg_ratings") or []) != n:
        raise DataError(f"{where}: relative_ratings and avg_ratings must list the same 2+ users")
    if line.get("ratings") is not None and len(line["ratings"]) != n:
        raise DataError(f"{where}: ratings has {len(line['ratings'])} entries for {n} users")
    pred = line.get("prediction")
    if pred is None:
        return
    if not isinstance(pred, list) or len(pred) != n:
        raise DataError(f"{where}: prediction must be null or a list of {n} entries, got {pred!r}")
    if mode == "point":
        if not all(p is None or (isinstance(p, (int, float)) and not isinstance(p, bool)) for p in pred):
            raise DataError(f"{where}: point prediction entries must be numbers or null, got {pred!r}")
    elif not all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in pred):
        raise DataError(f"{where}: {mode} prediction must be user indices 1..{n}, got {pred!r}")
    tied = line.get("tied_pairs")
    if tied is not None and (mode != "pair" or not all(
            len(p) == 2 and all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in p)
            and p[0] != p[1] for p in tied)):
        raise DataError(f"{where}: tied_pairs must be pairs of two different user indices 1..{n} on a pair line, "
                        f"got {tied!r}")


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(finite)) if finite else None


def rating_errors(lines: list[dict]) -> dict[str, list[float]]:
    """Pooled per-user signed errors of point lines carrying ``ratings``: the model's (users
    whose prediction is not null) and, on the same users, the naive baselines."""
    out: dict[str, list[float]] = {"model": [], "user_avg": [], "item_avg": []}
    for line in lines:
        if line["mode"] != "point" or line.get("ratings") is None:
            continue
        preds = line["prediction"] or [None] * len(line["ratings"])
        item_avg = line.get("item_avg_ratings")
        for u, (p, y) in enumerate(zip(preds, line["ratings"])):
            if p is None:
                continue
            out["model"].append(float(p) - float(y))
            out["user_avg"].append(float(line["avg_ratings"][u]) - float(y))
            if item_avg is not None:
                out["item_avg"].append(float(item_avg[u]) - float(y))
    return out


def mae_rmse(errors: list[float]) -> tuple[float, float] | None:
    if not errors:
        return None
    e = np.asarray(errors, np.float64)
    return float(np.mean(np.abs(e))), float(np.sqrt(np.mean(e * e)))


def summarize(scored: list[dict], suffix: str = "") -> dict:
    """``ptc``, ``ptc_rank``, ``exact_match`` (means over usable lines), ``missed``, ``n_tied`` (usable lines
    whose prediction has ties) and ``tied_share`` (of the usable lines)."""
    usable = [s for s in scored if s["usable"]]
    tied = sum(bool(s["ties"]) for s in usable)
    return {f"ptc{suffix}": _mean([s["ptc"] for s in usable]),
            f"ptc_rank{suffix}": _mean([s["ptc_rank"] for s in usable]),
            f"exact_match{suffix}": _mean([s["exact_match"] for s in usable]),
            f"missed{suffix}": len(scored) - len(usable),
            f"n_tied{suffix}": tied, f"tied_share{suffix}": tied / len(usable) if usable else None}


class _Tally:
    """``summarize`` of lines seen one at a time: counts and sums, so memory does not grow with the file."""

    KEYS = ("ptc", "ptc_rank", "exact_match")

    def __init__(self) -> None:
        self.lines = self.usable = self.tied = 0
        self.sums = {k: [0.0, 0] for k in self.KEYS}  # sum and count of the finite values

    def add(self, scored: dict) -> None:
        self.lines += 1
        self.usable += bool(scored["usable"])
        self.tied += bool(scored["usable"] and scored["ties"])
        for k in self.KEYS:
            v = scored[k] if scored["usable"] else None
            if v is not None and not math.isnan(v):
                self.sums[k][0] += v
                self.sums[k][1] += 1

    def summary(self, suffix: str = "") -> dict:
        out = {f"{k}{suffix}": (total / n if n else None) for k, (total, n) in self.sums.items()}
        out[f"missed{suffix}"] = self.lines - self.usable
        out[f"n_tied{suffix}"] = self.tied
        out[f"tied_share{suffix}"] = self.tied / self.usable if self.usable else None
        return out


def score_predictions(lines: Iterable[dict], options: dict | None = None) -> dict:
    """``llmrec score perrecbench``: metrics of a predictions file (see the README contract). ``lines`` are read
    once, in order (an iterator over the file: memory flat in its length). ``options["ties"]``: ``reference``
    (default) or ``aware`` (``score_line``)."""
    ties = (options or {}).get("ties", "reference")
    whole, per_mode = _Tally(), {m: _Tally() for m in CONTRACT_MODES}
    errors = [0.0, 0.0, 0]  # the model's rating errors: sum of |e|, sum of e², count
    rated = False
    for no, line in enumerate(lines, 1):
        check_line(line, f"line {no}")
        scored = score_line(line, ties)
        whole.add(scored)
        per_mode[line["mode"]].add(scored)
        if line["mode"] == "point" and line.get("ratings") is not None:
            rated = True
            for e in rating_errors([line])["model"]:
                errors[0] += abs(e)
                errors[1] += e * e
                errors[2] += 1
    out = whole.summary()
    for mode in CONTRACT_MODES:
        if per_mode[mode].lines:
            out.update(per_mode[mode].summary(f"_{mode}"))
    if rated:
        total_abs, total_sq, n = errors
        out["mae"], out["rmse"] = (total_abs / n, math.sqrt(total_sq / n)) if n else (None, None)
    return out


def aggregate_rows(rows: list[dict], levels: Sequence[str], ties: str = "reference") -> dict[str, float]:
    """Run metrics: the contract metrics over answered samples, then ``<metric>.<level>.<mode>``
    cells, ``<metric>.<level>`` and ``<metric>.avg`` (the mean of the cells: the paper's
    9-cell "Avg."), and MAE/RMSE next to the user-average and item-average baselines on the
    same users; ``n_tied`` / ``tied_share`` (and per cell) count the groups whose prediction has ties.
    Failed samples (engine errors) are counted, never scored as missed."""
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    out: dict[str, float | None] = {
        "n_samples": float(len(rows)), "n_answered": float(len(ok)),
        "failed": float(sum(r.get("status") == "failed" for r in rows)),
        "over_context": float(sum(r.get("status") == "over_context" for r in rows))}
    if not ok:
        return {k: float("nan") if v is None else float(v) for k, v in out.items()}
    out.update(score_predictions(ok, {"ties": ties}))
    scored = [score_line(r, ties) for r in ok]
    cells: dict[str, list[float]] = {"ptc": [], "ptc_rank": [], "exact_match": []}
    for level in levels:
        per_level: dict[str, list[float]] = {k: [] for k in cells}
        for mode in CONTRACT_MODES:
            idx = [i for i, r in enumerate(ok) if r.get("level") == level and r["mode"] == mode]
            if not idx:
                continue
            cell = summarize([scored[i] for i in idx])
            for key in cells:
                out[f"{key}.{level}.{mode}"] = cell[key]
                if cell[key] is not None:
                    cells[key].append(cell[key])
                    per_level[key].append(cell[key])
            out[f"missed.{level}.{mode}"] = cell["missed"]
            out[f"tied_share.{level}.{mode}"] = cell["tied_share"]
        for key, values in per_level.items():
            if values:
                out[f"{key}.{level}"] = float(np.mean(values))
    for key, values in cells.items():
        if values:
            out[f"{key}.avg"] = float(np.mean(values))
    for name, errors in rating_errors(ok).items():
        mr = mae_rmse(errors)
        if mr and name != "model":
            out[f"mae_{name}"], out[f"rmse_{name}"] = mr
    return {k: float("nan") if v is None else float(v) for k, v in out.items()}
