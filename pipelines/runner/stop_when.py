"""``execution.stop_when``: stop a run as soon as "is it worse than the pinned baseline?" is decided.

With ``stop_when: {against, metric, margin, alpha}`` the run sends whole clusters (the benchmark's
``PairedOutcomes.cluster``, e.g. a user or a preference) in a seeded random order, stratified by setting (each
setting's clusters spread evenly through the order, so the first samples are representative). After each written
batch the clusters complete so far — the longest complete prefix of the planned order, so the order the sequence
sees is the random one whatever the replicas' speed — are paired with the baseline's outcomes of the same samples,
and the anytime-valid confidence sequence of ``pipelines.common.sequential`` is updated with each cluster's mean
difference. The run stops once the sequence excludes ``−margin`` on either side (``not worse`` / ``worse``), through
the budget's clean stop (no further batch starts), and its metrics are written over the samples it ran, with the
decision, the sequence's bounds and the share of clusters used (``stop_when/…`` in the run's metrics file,
``RunDir.METRICS``, and in MLflow). A re-run without ``stop_when`` resumes to the full set.

``against``: a pin name (``llmrec baseline pin``, looked up in the run's tracking store) or a run directory. The
baseline's records are read from its result store; its outcomes are the benchmark's ``paired_outcomes`` of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from pydantic import Field

from llmrec import pin_store
from llmrec.config import StrictModel
from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.common import sequential
from llmrec.pipelines.common.store import ResultStore
from llmrec.rundir import RunDir

PREFIX = "stop_when/"
DECISION_CODE = {sequential.NOT_WORSE: 1.0, sequential.WORSE: -1.0, sequential.UNDECIDED: 0.0}


class StopWhenConfig(StrictModel):
    """Stop once the candidate is decided not worse, or worse, than a baseline by more than ``margin``."""

    against: str = Field(..., description="a pinned baseline's name (`llmrec baseline list`) or a run directory")
    metric: str = Field(..., description="the metric decided on (one with per-sample outcomes, e.g. accuracy)")
    margin: float = Field(..., ge=0, description="how much worse the run may be and still count as not worse")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="error rate of the decision, at whatever batch it is made")
    lower_is_better: bool = Field(False, description="the metric is better when lower (e.g. a miss rate)")
    seed: int = Field(0, description="seed of the clusters' random order")


def baseline_location(cfg: StopWhenConfig, tracking_uri: str | None, entry: str) -> str:
    """The run directory ``against`` names: itself when it is one, else the pinned run of this benchmark entry."""
    if RunDir.is_run(cfg.against):
        return cfg.against
    records = pin_store.entries(pin_store.pinned_run(cfg.against, tracking_uri))
    if len(records) == 1:
        return records[0]["location"]
    match = [r for r in records if r["group"] == entry]
    if not match:
        raise ConfigError(f"execution.stop_when.against: the pin {cfg.against!r} holds no run of {entry} (it holds "
                          f"{', '.join(r['group'] for r in records)})")
    return match[0]["location"]


def protocol_differences(bench, bench_cfg, location: str) -> list[str]:
    """``key baseline → run`` for each benchmark protocol key (``protocol_keys``) whose value differs between the
    baseline at ``location`` and this run."""
    from llmrec.pipelines.protocol import protocol_record
    from llmrec.pipelines.registry import benchmark_config

    section = RunDir(location).config().get("benchmark") or {}
    if section.get("name") != bench_cfg.name:
        return [f"benchmark.name {section.get('name')!r} → {bench_cfg.name!r}"]
    theirs, ours = protocol_record(bench, benchmark_config(section)), protocol_record(bench, bench_cfg)
    return [f"benchmark.{k} {theirs.get(k)!r} → {ours.get(k)!r}" for k in sorted(theirs.keys() | ours.keys())
            if theirs.get(k) != ours.get(k)]


def baseline_outcomes(bench, bench_cfg, assets, location: str, metric: str) -> dict[tuple[str, str], float]:
    """(sample_id, setting) → the baseline's value of ``metric``, from its result store. A baseline measured under
    another protocol is refused, naming the keys."""
    diffs = protocol_differences(bench, bench_cfg, location)
    if diffs:
        raise ConfigError(f"execution.stop_when.against: the baseline {location} was measured under another "
                          f"protocol ({'; '.join(diffs)})")
    rows = [r for r in ResultStore(RunDir(location).results, writer=False).load().values()
            if r.get("status", "ok") == "ok"]
    if not rows:
        raise ConfigError(f"execution.stop_when.against: {location} holds no answered sample in its result store "
                          f"({RunDir.RESULTS}/)")
    out = {(str(o.sample_id), str(o.setting)): float(o.value)
           for o in caps.paired_outcomes(bench, bench_cfg, rows, assets) if o.metric == metric}
    if not out:
        raise ConfigError(f"execution.stop_when: the baseline {location} has no per-sample outcome of {metric!r}")
    return out


def cluster_order(bench, samples: list[dict], seed: int) -> list[str]:
    """The clusters of ``samples`` in a seeded random order, stratified by setting: each stratum (the settings a
    cluster's samples cover) is shuffled and its clusters spread evenly through the order."""
    strata: dict[tuple[str, ...], list[str]] = {}
    settings: dict[str, set[str]] = {}
    for s in samples:
        settings.setdefault(str(caps.cluster(bench, s)), set()).add(caps.setting_of(bench, s))
    for c in sorted(settings):
        strata.setdefault(tuple(sorted(settings[c])), []).append(c)
    rng = np.random.default_rng(seed)
    keyed = []
    for _, members in sorted(strata.items()):
        members = list(rng.permutation(members))
        keyed += [((i + rng.random()) / len(members), str(c)) for i, c in enumerate(members)]
    return [c for _, c in sorted(keyed)]


def ordered(bench, samples: list[dict], order: list[str]) -> list[dict]:
    """``samples`` with whole clusters in ``order`` (a cluster's samples keep their relative order)."""
    rank = {c: i for i, c in enumerate(order)}
    return sorted(samples, key=lambda s: rank[str(caps.cluster(bench, s))])


@dataclass
class EarlyStop:
    """The sequence over a run's clusters, updated after each written batch."""

    config: StopWhenConfig
    bench: object
    bench_cfg: object
    assets: dict | None
    baseline: dict[tuple[str, str], float]
    order: list[str]  # every cluster of the run, in the order they are sent
    members: dict[str, set[str]]  # cluster → its sample ids
    done: set[str] = field(default_factory=set)
    values: list[float] = field(default_factory=list)  # cluster differences, in order
    used: int = 0  # clusters of the order consumed (paired or not)
    state: sequential.SequenceState | None = None

    @classmethod
    def build(cls, config: StopWhenConfig, bench, bench_cfg, assets, samples: list[dict],
              baseline: dict[tuple[str, str], float]) -> "EarlyStop":
        order = cluster_order(bench, samples, config.seed)
        members: dict[str, set[str]] = {}
        for s in samples:
            members.setdefault(str(caps.cluster(bench, s)), set()).add(str(s["sample_id"]))
        return cls(config, bench, bench_cfg, assets, baseline, order, members)

    @property
    def paired_total(self) -> int:
        """Clusters with at least one baseline outcome: the population the sequence's share counts."""
        ids = {sid for sid, _ in self.baseline}
        return sum(1 for c in self.order if self.members[c] & ids)

    @property
    def decided(self) -> bool:
        return self.state is not None and self.state.decision != sequential.UNDECIDED

    def update(self, rows: list[dict]) -> bool:
        """Take written records (any order); True once decided."""
        self._rows = getattr(self, "_rows", {})
        for r in rows:
            self._rows[str(r["sample_id"])] = r
            self.done.add(str(r["sample_id"]))
        sign = -1.0 if self.config.lower_is_better else 1.0
        while self.used < len(self.order) and self.members[self.order[self.used]] <= self.done:
            c = self.order[self.used]
            self.used += 1
            cluster_rows = [self._rows[i] for i in sorted(self.members[c])
                            if self._rows[i].get("status", "ok") == "ok"]
            diffs = [o.value - self.baseline[(str(o.sample_id), str(o.setting))]
                     for o in caps.paired_outcomes(self.bench, self.bench_cfg, cluster_rows, self.assets)
                     if o.metric == self.config.metric and (str(o.sample_id), str(o.setting)) in self.baseline]
            if diffs:
                self.values.append(sign * float(np.mean(diffs)))
        self.state = sequential.confidence_sequence(self.values, max(self.paired_total, len(self.values), 1),
                                                    self.config.alpha, self.config.margin)
        return self.decided

    def metrics(self, samples_used: int, samples_total: int) -> dict[str, float]:
        """The ``stop_when/…`` keys of the run's metrics (``RunDir.METRICS``) and MLflow."""
        s = self.state
        if s is None:
            return {}
        return {f"{PREFIX}decision": DECISION_CODE[s.decision], f"{PREFIX}stopped_early": float(
                    self.decided and samples_used < samples_total),
                f"{PREFIX}estimate": s.estimate, f"{PREFIX}lower": s.lower, f"{PREFIX}upper": s.upper,
                f"{PREFIX}margin": self.config.margin, f"{PREFIX}alpha": self.config.alpha,
                f"{PREFIX}clusters_used": float(s.n), f"{PREFIX}clusters_total": float(s.n_total),
                f"{PREFIX}share_used": samples_used / samples_total if samples_total else math.nan}

    def line(self, samples_used: int, samples_total: int) -> str:
        s = self.state
        if s is None:
            return ""
        how = "stopped early" if self.decided and samples_used < samples_total else "ran to the end"
        return (f"stop_when: {s.decision} than {self.config.against} by more than {self.config.margin:g} on "
                f"{self.config.metric} ({how}: {samples_used}/{samples_total} samples, {s.n}/{s.n_total} clusters; "
                f"difference {s.estimate:+.4f}, {1 - s.alpha:.0%} confidence sequence [{s.lower:+.4f}, "
                f"{s.upper:+.4f}])")
