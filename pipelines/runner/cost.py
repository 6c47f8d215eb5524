"""The cost ledger of a run: what its engines processed, how long they were busy, what the run held, what it cost.

Computed from the run's stored records (every record in every result shard: a failed attempt retried later
cost what it cost), so a resumed run counts the whole run, not only the work of its last invocation. What a
record cannot say, the CPUs and GPUs each invocation held while its engines were up, is kept per invocation in
the run directory (``RunDir.COST_LEDGER``) and summed. Engine work no stored record holds (a batch that was running
when a budget stopped the run) is the request cache's *unsettled* work of the run (``serving.cache``), counted
until a later invocation stores it as the run's own call: every call an engine served counts once. Keys (``cost/`` then an optional role, see docs/cost.md):

- ``requests``, ``requests_from_cache``: engine calls an engine served / the request cache answered;
  ``requests_from_other_runs``: of those the cache answered, the ones whose answer was computed for another run
  (``Result.computed_for``: the entry's writer is another run directory, or is not recorded);
- ``prompt_tokens``, ``cached_tokens``, ``completion_tokens``: of the calls an engine served (a call answered by
  the request cache costs nothing and adds no token; an over-context call was not processed and adds none);
  ``cached_tokens`` are the prompt tokens the engine took from its prefix/KV cache (a hosted API's cached input);
- ``engine_seconds``: the engines' busy time, summed request by request (``latency_s``; requests an engine runs
  concurrently each count their own time, so it can exceed the wall clock);
- ``reserved_cpu_seconds``, ``reserved_gpu_seconds``: CPUs and GPUs held x the seconds they were held
  (``placement.role_reservations`` x the invocation's setup + stream + teardown), busy or not;
- ``usd``: from ``execution.prices`` (absent: no usd key); ``samples``, ``usd_per_1k_samples``,
  ``tokens_per_1k_samples`` (totals only).

``cost/<key>`` is the run's total; ``cost/subject/<key>`` and ``cost/judge/<key>`` its roles.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields
from typing import Iterable

from pydantic import Field, model_validator

from llmrec.config import StrictModel
from llmrec.costs import PREFIX, TOKENS_PER_1K, USD_PER_1K
from llmrec.rundir import RunDir

log = logging.getLogger(__name__)

ROLES = ("subject", "judge")
NOT_PROCESSED = ("over_context",)  # a call the engine refused before processing: it adds no token


class Price(StrictModel):
    """What one role's engine costs: per million tokens (a hosted API) and/or per hour held (a cluster)."""

    input_per_million: float = Field(0.0, ge=0, description="USD per million prompt tokens not served from a cache")
    cached_input_per_million: float | None = Field(
        None, ge=0, description="USD per million prompt tokens the engine served from its prefix cache (a hosted "
                                "API's cached input); None = input_per_million")
    output_per_million: float = Field(0.0, ge=0, description="USD per million completion tokens")
    gpu_hour: float = Field(0.0, ge=0, description="USD per GPU-hour held (reserved, busy or not)")
    cpu_hour: float = Field(0.0, ge=0, description="USD per CPU-hour held (reserved, busy or not)")
    node_hour: float = Field(0.0, ge=0, description="USD per node-hour held: the CPU-hours held / cpus_per_node")
    cpus_per_node: float | None = Field(None, gt=0, description="CPUs of one node (node_hour needs it)")

    @model_validator(mode="after")
    def _node(self) -> "Price":
        if self.node_hour and self.cpus_per_node is None:
            raise ValueError("node_hour needs cpus_per_node (the CPUs of one node) to turn CPU-hours into node-hours")
        return self


class Prices(StrictModel):
    """The price table: a role without a price adds nothing to ``cost/usd`` (e.g. a local judge you do not pay)."""

    subject: Price | None = Field(None, description="the subject engine's price")
    judge: Price | None = Field(None, description="the judge engine's price")


@dataclass
class Usage:
    """One role's counts (see the module docstring)."""

    requests: int = 0
    requests_from_cache: int = 0
    requests_from_other_runs: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    engine_seconds: float = 0.0
    reserved_cpu_seconds: float = 0.0
    reserved_gpu_seconds: float = 0.0

    def add(self, other: "Usage") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def stage_roles(bench, bench_cfg) -> dict[str, str]:
    """stage name → the role of its engine (a record's outputs are keyed by stage)."""
    return {s.name: s.engine for s in bench.stages(bench_cfg)}


def _calls(record: dict) -> Iterable[tuple[str, dict]]:
    for stage, out in (record.get("outputs") or {}).items():
        for o in out if isinstance(out, list) else [out]:
            if isinstance(o, dict):
                yield stage, o


def record_usage(records: Iterable[dict], roles: dict[str, str]) -> dict[str, Usage]:
    """role → what its engine did for ``records`` (a call's role: its transcript reference's, else its stage's)."""
    out: dict[str, Usage] = {}
    for r in records:
        for stage, o in _calls(r):
            role = (o.get("request") or {}).get("role") or roles.get(stage, "subject")
            u = out.setdefault(role, Usage())
            if o.get("from_cache"):
                u.requests_from_cache += 1
                u.requests_from_other_runs += bool(o.get("computed_for"))
                continue
            u.requests += 1
            u.engine_seconds += float(o.get("latency_s") or 0.0)
            if o.get("finish_reason") in NOT_PROCESSED:
                continue
            u.prompt_tokens += int(o.get("prompt_tokens") or 0)
            u.cached_tokens += int(o.get("cached_prompt_tokens") or 0)
            u.completion_tokens += int(o.get("completion_tokens") or 0)
    return out


def answer_sources(records: Iterable[dict]) -> dict[str, int]:
    """Where the engine calls of ``records`` got their answers: ``answers`` (every call), ``from_cache`` (the request
    cache answered) and ``from_other_runs`` (of those, answers computed for another run: not this run's work)."""
    out = dict.fromkeys(("answers", "from_cache", "from_other_runs"), 0)
    for r in records:
        for _, o in _calls(r):
            out["answers"] += 1
            out["from_cache"] += bool(o.get("from_cache"))
            out["from_other_runs"] += bool(o.get("from_cache") and o.get("computed_for"))
    return out


def call_usage(calls: Iterable[tuple[str, object]]) -> dict[str, Usage]:
    """role → the counts of engine calls given as (role, ``Result``): the run's unsettled work (``serving.cache``)."""
    out: dict[str, Usage] = {}
    for role, res in calls:
        u = out.setdefault(role, Usage())
        u.requests += 1
        u.engine_seconds += float(res.latency_s or 0.0)
        u.prompt_tokens += int(res.prompt_tokens or 0)
        u.cached_tokens += int(res.cached_prompt_tokens or 0)
        u.completion_tokens += int(res.completion_tokens or 0)
    return out


def stored_records(store) -> list[dict]:
    """Every record of every shard of a ``ResultStore`` (not only the newest per sample), in write order, typed and
    JSON shards alike (a damaged shard is the store's to quarantine; it adds nothing here)."""
    return store.all_records()


def reserved_usage(reservations: dict[str, tuple[float, float]], held_s: float) -> dict[str, Usage]:
    """role → the CPU and GPU seconds held for ``held_s`` seconds."""
    return {role: Usage(reserved_cpu_seconds=c * held_s, reserved_gpu_seconds=g * held_s)
            for role, (c, g) in reservations.items()}


def held_seconds(timings: dict[str, float]) -> float:
    """Seconds an invocation held its engines' resources: from placing them to tearing them down."""
    return sum(timings.get(k, 0.0) for k in ("time_setup_s", "time_stream_s", "time_teardown_s"))


def usd(u: Usage, price: Price) -> float:
    """What ``u`` costs at ``price``."""
    cached_price = price.input_per_million if price.cached_input_per_million is None else \
        price.cached_input_per_million
    cached = min(u.cached_tokens, u.prompt_tokens)
    tokens = ((u.prompt_tokens - cached) * price.input_per_million + cached * cached_price
              + u.completion_tokens * price.output_per_million) / 1e6
    node = u.reserved_cpu_seconds / price.cpus_per_node * price.node_hour if price.node_hour else 0.0
    return tokens + (u.reserved_gpu_seconds * price.gpu_hour + u.reserved_cpu_seconds * price.cpu_hour + node) / 3600


def role_usd(usage: dict[str, Usage], prices: Prices | None) -> dict[str, float]:
    """role → USD, for the roles that have a price (empty without a price table)."""
    if prices is None:
        return {}
    return {role: usd(u, getattr(prices, role)) for role, u in usage.items()
            if role in ROLES and getattr(prices, role) is not None}


def ledger(usage: dict[str, Usage], prices: Prices | None, samples: int) -> dict[str, float]:
    """The ``cost/`` keys of a run: per role and in total (see the module docstring)."""
    total, out = Usage(), {}
    for role in sorted(usage):
        total.add(usage[role])
        out.update({f"{PREFIX}{role}/{k}": float(v) for k, v in asdict(usage[role]).items()})
    out.update({f"{PREFIX}{k}": float(v) for k, v in asdict(total).items()})
    out[f"{PREFIX}samples"] = float(samples)
    if samples:
        out[TOKENS_PER_1K] = total.tokens / samples * 1000
    priced = role_usd(usage, prices)
    if prices is not None:
        for role, v in priced.items():
            out[f"{PREFIX}{role}/usd"] = v
        unpriced = [r for r in usage if r not in priced and (usage[r].requests or usage[r].reserved_cpu_seconds)]
        if unpriced:
            log.info("cost ledger: no price for %s in execution.prices; it adds nothing to cost/usd",
                     ", ".join(unpriced))
        out[f"{PREFIX}usd"] = sum(priced.values())
        if samples:
            out[USD_PER_1K] = out[f"{PREFIX}usd"] / samples * 1000
    return out


def past_reservations(rd: RunDir) -> dict[str, Usage]:
    """role → the reserved seconds of the run's earlier invocations (``RunDir.COST_LEDGER``)."""
    out: dict[str, Usage] = {}
    for inv in rd.cost_invocations():
        for role, held in (inv.get("reserved") or {}).items():
            out.setdefault(role, Usage()).add(Usage(reserved_cpu_seconds=float(held.get("cpu_seconds", 0.0)),
                                                    reserved_gpu_seconds=float(held.get("gpu_seconds", 0.0))))
    return out


def record_invocation(rd: RunDir, reserved: dict[str, Usage], held_s: float) -> None:
    """Add this invocation's reserved seconds to the run's ledger file."""
    rd.add_cost_invocation({"held_s": held_s, "reserved": {
        role: {"cpu_seconds": u.reserved_cpu_seconds, "gpu_seconds": u.reserved_gpu_seconds}
        for role, u in reserved.items()}})


def merged(*parts: dict[str, Usage]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for part in parts:
        for role, u in part.items():
            out.setdefault(role, Usage()).add(u)
    return out


class RunCost:
    """The books of one invocation of a run: what the run spent before it (the budget's start), the reservation
    this invocation adds to ``RunDir.COST_LEDGER``, and the ``cost/`` keys of its metrics. A store without
    results (a new run, ``--fresh``) starts the ledger file afresh: reservations go with the results they bought."""

    def __init__(self, p, shared_subject: bool = False):
        from llmrec.pipelines.runner.execution import WorkLedger, cache_path_for, run_key
        from llmrec.pipelines.runner.placement import role_reservations

        cfg = p.config
        self.rd, self.store, self.prices = RunDir(p.run_dir), p.store, cfg.execution.prices
        path = cache_path_for(cfg)
        self.work = WorkLedger(path, run_key(p)) if path else None
        if not self.store.shards():
            self.rd.drop_cost_invocations()
            if self.work is not None:
                self.work.drop()
        self.roles = stage_roles(p.bench, cfg.benchmark)
        self.reservations = role_reservations(cfg.engine, cfg.judge, cfg.execution, shared_subject)

    def stored(self) -> dict[str, Usage]:
        """role → the run's usage as stored: every record, every recorded invocation's reservation."""
        return merged(record_usage(stored_records(self.store), self.roles), past_reservations(self.rd))

    def unsettled(self) -> dict[str, Usage]:
        """role → the run's engine work that no stored record holds (the request cache's record of it)."""
        return call_usage(self.work.calls()) if self.work is not None else {}

    def usage(self) -> dict[str, Usage]:
        """role → the run's usage: as stored, plus the engine work no stored record holds."""
        return merged(self.stored(), self.unsettled())

    def budget(self, cfg):
        """The invocation's :class:`budget.Budget` (``cfg``: ``execution.budget``), None without one."""
        from llmrec.pipelines.runner.budget import Budget

        return None if cfg is None else Budget(cfg, self.prices, self.roles, self.stored(), self.reservations,
                                               unsettled=self.unsettled)

    def record(self, timings: dict[str, float]) -> None:
        """Add this invocation's reservation (nothing when it placed no engine: nothing was pending)."""
        held = held_seconds(timings)
        if held > 0:
            record_invocation(self.rd, reserved_usage(self.reservations, held), held)

    def ledger(self, samples: int) -> dict[str, float]:
        return ledger(self.usage(), self.prices, samples)
