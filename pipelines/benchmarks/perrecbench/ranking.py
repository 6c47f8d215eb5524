"""From model answers to an ordering list (1-based user indices, most preferred first).

- Point: predicted rating − the user's average rating, ordered as the labels are
  (``metrics.point_ordering``).
- Pairwise: heapsort (max-heap, O(n log n) comparisons), as the reference's ``heapsort``:
  build the heap from ``n//2 − 1`` down, extract to the end, reverse. ``greater(a, b)``
  (0-based users) is True only when the model prefers ``a`` in BOTH prompt orders.
- Listwise: the parsed ``predicted_ranking`` is already an ordering list.

For the runner, the heapsort is replayed from scratch each round against a memo of the
comparisons answered so far; the first unanswered one stops it (``Pending``) and is the
next round's request (both prompt orders).
"""

from __future__ import annotations

from typing import Callable

from llmrec.pipelines.benchmarks.perrecbench.metrics import point_ordering
from llmrec.pipelines.benchmarks.perrecbench.parsing import prefers_first

__all__ = ["Pending", "heapsort_ordering", "next_comparison", "pair_key", "point_ordering"]


class Pending(Exception):
    """A comparison the memo does not answer yet."""

    def __init__(self, a: int, b: int):
        super().__init__(f"compare users {a} and {b}")
        self.a, self.b = a, b


def heapsort_ordering(n: int, greater: Callable[[int, int], bool]) -> list[int]:
    """Users 0..n-1 heap-sorted with ``greater``; returns the 1-based ordering, best first."""
    arr = list(range(n))

    def sift(size: int, i: int) -> None:
        while True:
            largest, left, right = i, 2 * i + 1, 2 * i + 2
            if left < size and greater(arr[left], arr[largest]):
                largest = left
            if right < size and greater(arr[right], arr[largest]):
                largest = right
            if largest == i:
                return
            arr[i], arr[largest] = arr[largest], arr[i]
            i = largest

    for i in range(n // 2 - 1, -1, -1):
        sift(n, i)
    for end in range(n - 1, 0, -1):
        arr[0], arr[end] = arr[end], arr[0]
        sift(end, 0)
    return [u + 1 for u in reversed(arr)]


def pair_key(a: int, b: int) -> str:
    """Memo key of the prompt showing user ``a`` as [User A] and ``b`` as [User B] (0-based)."""
    return f"{a}>{b}"


def next_comparison(n: int, answers: dict[str, str | None]) -> tuple[int, int] | list[int]:
    """Replay the heapsort on the memo ``answers`` (pair_key → parsed reply, None = never
    parsed). Returns the first comparison still unanswered (a, b), or the final ordering."""

    def greater(a: int, b: int) -> bool:
        ab, ba = pair_key(a, b), pair_key(b, a)
        if ab not in answers or ba not in answers:
            raise Pending(a, b)
        return prefers_first(answers[ab], answers[ba])

    try:
        return heapsort_ordering(n, greater)
    except Pending as p:
        return (p.a, p.b)
