"""``execution.budget``: stop a run cleanly when it has spent its tokens, dollars or GPU-hours.

The budget counts the whole run, as the cost ledger does (``cost.py``): what the stored records of earlier
invocations and the resources they held cost, plus this invocation's work. The streaming loop consults a
:class:`Budget` after each batch it wrote (``charge``); once a limit is reached the loop stops pulling batches
(Ray Data then shuts its executor down: no further batch starts) and the run ends with ``BudgetReached``
(exit code ``EXIT_BUDGET``) after its finished samples are stored. A re-run with a larger budget resumes; one
with the same budget stops again before starting anything.
"""

from __future__ import annotations

import time
from typing import Callable

from pydantic import Field, model_validator

from llmrec.config import StrictModel
from llmrec.errors import BudgetReached
from llmrec.pipelines.runner.cost import Prices, Usage, merged, record_usage, reserved_usage, role_usd


class BudgetConfig(StrictModel):
    """Limits of one run (its every invocation together); the first one reached stops it."""

    tokens: int | None = Field(None, gt=0, description="prompt + completion tokens the engines processed (subject and "
                                                       "judge; the request cache's answers are free)")
    usd: float | None = Field(None, gt=0, description="USD at execution.prices (tokens and the resources held)")
    gpu_hours: float | None = Field(None, gt=0, description="GPU-hours held by the run's engines, busy or not")

    @model_validator(mode="after")
    def _some(self) -> "BudgetConfig":
        if self.tokens is None and self.usd is None and self.gpu_hours is None:
            raise ValueError("give at least one of tokens, usd, gpu_hours (or no budget section)")
        return self


def check_budget_prices(budget: BudgetConfig | None, prices: Prices | None) -> str | None:
    """The config error of a usd budget without a price table (None when consistent)."""
    if budget is not None and budget.usd is not None and (prices is None or (prices.subject is None
                                                                            and prices.judge is None)):
        return "execution.budget.usd needs execution.prices (what the subject and/or judge cost)"
    return None


class Budget:
    """What a run has spent against its limits. ``spent``: the run's usage before this invocation (stored
    records and earlier reservations); ``reservations``: role → (CPUs, GPUs) this invocation holds, counted
    from the budget's creation (just before the engines are placed) on; ``unsettled``: role → the engine work no
    stored record holds yet, read when asked (a batch abandoned earlier, the batches running now)."""

    def __init__(self, cfg: BudgetConfig, prices: Prices | None, roles: dict[str, str], spent: dict[str, Usage],
                 reservations: dict[str, tuple[float, float]], clock: Callable[[], float] = time.monotonic,
                 unsettled: Callable[[], dict[str, Usage]] | None = None):
        self.cfg, self.prices, self._roles = cfg, prices, roles
        self._spent = merged(spent)
        self._reservations, self._clock, self._t0 = reservations, clock, clock()
        self._unsettled = unsettled or dict
        self.stopped = False  # set once ``charge`` said to stop

    def usage(self) -> dict[str, Usage]:
        """role → the run's usage so far, this invocation's held resources up to now included."""
        return merged(self._spent, reserved_usage(self._reservations, self._clock() - self._t0), self._unsettled())

    def reached(self) -> str | None:
        """Which limit is reached, as ``usd 0.0123 of 0.01``; None while none is."""
        usage, spent = self.usage(), Usage()
        for u in usage.values():
            spent.add(u)
        checks = [("tokens", self.cfg.tokens, float(spent.tokens), "{:.0f}"),
                  ("gpu_hours", self.cfg.gpu_hours, spent.reserved_gpu_seconds / 3600, "{:.4g}"),
                  ("usd", self.cfg.usd, sum(role_usd(usage, self.prices).values()), "{:.4g}")]
        for name, limit, value, form in checks:
            if limit is not None and value >= limit:
                return f"{name} {form.format(value)} of {form.format(limit)}"
        return None

    def charge(self, samples: list[dict]) -> bool:
        """Add a written batch's records (their work settled: no longer unsettled); True when the run must stop (a
        limit is reached)."""
        self._spent = merged(self._spent, record_usage(samples, self._roles))
        self.stopped = self.stopped or self.reached() is not None
        return self.stopped


def budget_stop(budget: Budget, stored: int, total: int) -> BudgetReached:
    """The one-line error a run stopped by its budget ends with."""
    what = budget.reached() or "reached at the last batch"
    return BudgetReached(
        f"budget reached ({what}, execution.budget): {stored} of {total} samples stored, {total - stored} not "
        f"run. Re-run with a larger budget to resume (--set execution.budget.{what.split()[0]}=<more>); finished "
        "samples are kept")
