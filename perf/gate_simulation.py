"""How honest and how quick the stop-when-decided rule is: simulated A/B evaluations, no engine, no Ray (seconds).

Each replication is one evaluation of ``--users`` clusters with ``--per-user`` binary outcomes each (e.g. a user's
questions), answered by a baseline A and a candidate B. A user's ability ``p`` is drawn once (strong within-user
correlation: ``Beta(0.3, 0.3)`` spread over [0.15, 0.85], i.e. most users are either good or bad for both models;
weak: every user at 0.6) and, with strong correlation, the user also favours one of the two models by ±0.05 (so the
differences of one user's questions are correlated too). B's chance on a question is A's plus ``diff``. The clusters
come in a random order; after each one the confidence sequence (``llmrec.pipelines.common.sequential``) is
updated, and the evaluation stops at its first decision against the margin. Every population mean is exact: no
chance is clipped, so the equal and boundary cases sit exactly where they claim.

Printed per case: the share of replications decided "worse" (a false regression when B is not worse than the
margin allows), "not worse", undecided at the end, and the mean share of the clusters used before stopping.

    python perf/gate_simulation.py                   # 500 replications per case, 2000 users × 4 questions
    python perf/gate_simulation.py --reps 2000 --users 1000 --margin 0.05 --alpha 0.05
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from llmrec.pipelines.common import sequential as sq


@dataclass(frozen=True)
class Case:
    name: str
    diff: float  # B − A in chance of a right answer (per question)
    margin: float
    correlated: bool  # strong within-user correlation


def cases(margin: float) -> list[Case]:
    return [Case("equal", 0.0, margin, False),
            Case("equal, strong within-user correlation", 0.0, margin, True),
            Case("equal, no margin (the boundary)", 0.0, 0.0, True),
            Case("worse by the margin (the boundary)", -margin, margin, True),
            Case("worse by 2 × margin", -2 * margin, margin, False),
            Case("worse by 2 × margin, strong within-user correlation", -2 * margin, margin, True),
            Case("better by 2 × margin, strong within-user correlation", 2 * margin, margin, True)]


def differences(case: Case, reps: int, users: int, per_user: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, users) cluster-level differences B − A, in the random order the run would draw them."""
    if case.correlated:
        p = 0.15 + 0.7 * rng.beta(0.3, 0.3, size=(reps, users))
        lean = np.where(rng.random((reps, users)) < 0.5, 0.05, -0.05)  # mean exactly 0 over the population
        lean -= lean.mean(axis=1, keepdims=True)
    else:
        p, lean = np.full((reps, users), 0.6), np.zeros((reps, users))
    pa, pb = p - lean / 2, p + lean / 2 + case.diff
    assert pa.min() >= 0 and pb.min() >= 0 and pa.max() <= 1 and pb.max() <= 1
    a = rng.random((reps, users, per_user)) < pa[..., None]
    b = rng.random((reps, users, per_user)) < pb[..., None]
    return (b.astype(float) - a).mean(axis=-1)


def simulate(case: Case, reps: int = 500, users: int = 2000, per_user: int = 4, alpha: float = 0.05,
             seed: int = 0) -> dict:
    """The share of replications ending in each decision and the mean share of clusters used."""
    rng = np.random.default_rng(seed)
    d = differences(case, reps, users, per_user, rng)
    decisions = sq.decide_at(d, users, alpha, case.margin)
    stop = sq.stopping_index(decisions)
    final = decisions[np.arange(reps), stop - 1]
    return {"case": case.name, "diff": case.diff, "margin": case.margin, "reps": reps,
            "worse": float(np.mean(final == sq.WORSE)), "not_worse": float(np.mean(final == sq.NOT_WORSE)),
            "undecided": float(np.mean(final == sq.UNDECIDED)), "share_used": float(np.mean(stop / users))}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--per-user", type=int, default=4)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    out = [simulate(c, args.reps, args.users, args.per_user, args.alpha, args.seed + i)
           for i, c in enumerate(cases(args.margin))]
    print(f"{args.reps} replications per case; {args.users} users × {args.per_user} questions; "
          f"margin {args.margin}; alpha {args.alpha}")
    print(f"{'case':<54} {'B − A':>6} {'worse':>6} {'not worse':>9} {'undecided':>9} {'share used':>10}")
    for r in out:
        print(f"{r['case']:<54} {r['diff']:>+6.2f} {r['worse']:>6.3f} {r['not_worse']:>9.3f} {r['undecided']:>9.3f} "
              f"{r['share_used']:>10.1%}")
    print(f"({time.perf_counter() - start:.1f} s)")
    return out


if __name__ == "__main__":
    main()
