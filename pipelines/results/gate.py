"""``llmrec gate CANDIDATE --against NAME --metric M --margin D``: is the candidate worse than a pinned baseline?

A paired, cluster-aware **non-inferiority** test per benchmark entry and setting. The candidate's and the pinned
run's per-unit outcomes (``PairedOutcomes.paired_outcomes``, as ``llmrec compare`` pairs them: units answered in both
runs) give the difference ``d = candidate − baseline`` of metric M (sign flipped with ``--lower-is-better``, so a
positive ``d`` is always the candidate doing better). Its distribution comes from the cluster bootstrap that
``llmrec compare`` uses (``pipelines.common.paired.cluster_bootstrap_diffs``: whole clusters, e.g. a user's
samples, resampled together). Two one-sided bootstrap p-values test the margin ``−D``:

- ``p_not_worse`` of H0 "d ≤ −D" (the share of draws at or below −D), small when the candidate is not worse;
- ``p_worse`` of H0 "d ≥ −D" (the share at or above), small when it is worse by more than the margin.

Both families are Holm-adjusted (statsmodels ``multipletests``) over every entry × setting tested. A row **passes**
when its adjusted ``p_not_worse`` ≤ α, is a **regression** when its adjusted ``p_worse`` ≤ α, and otherwise (or
with fewer than ``MIN_CLUSTERS`` clusters) has **not enough evidence**. The gate passes when every row passes,
fails with ``EXIT_REGRESSION`` when any row regresses, and otherwise exits ``EXIT_INCONCLUSIVE``. The interval
shown is the (1 − 2α) percentile interval: its lower bound above −D is the unadjusted one-sided test at α.

Before any number, the pinned runs are re-opened and their config hashes checked against the pin (results changed
under a pin are refused), and the candidate's protocol is compared with the baseline's per entry: a difference is
refused, naming each key, unless ``--allow-protocol-difference`` (then it is stated in every output).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import typer

from llmrec import storage
from llmrec.cli_options import STORE_HELP, data_dir_option, tracking_uri_option
from llmrec.errors import EXIT_INCONCLUSIVE, EXIT_REGRESSION, ConfigError, DataError
from llmrec.pipelines.common import paired
from llmrec.pipelines.results import pins as pin_store
from llmrec.pipelines.results.outcomes import run_outcomes
from llmrec.pipelines.results.stored import StoredRun
from llmrec.registry import installed_only
from llmrec.small_samples import MIN_CLUSTERS

PASS, REGRESSION, INCONCLUSIVE = "pass", "regression", "not enough evidence"
EXIT = {PASS: 0, REGRESSION: EXIT_REGRESSION, INCONCLUSIVE: EXIT_INCONCLUSIVE}


@dataclass
class GateRow:
    entry: str
    setting: str
    metric: str
    statistic: str
    n: int
    clusters: int
    baseline: float
    candidate: float
    estimate: float  # candidate − baseline (sign flipped when lower is better)
    ci_low: float
    ci_high: float
    p_not_worse: float
    p_worse: float
    p_not_worse_holm: float = math.nan
    p_worse_holm: float = math.nan
    decision: str = INCONCLUSIVE
    note: str = ""


@dataclass
class Gate:
    candidate: str
    baseline: str  # the pin's name
    baseline_location: str
    metric: str
    margin: float
    alpha: float
    lower_is_better: bool
    resamples: int
    rows: list[GateRow] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)  # entries on one side only
    protocol_diff: list[dict] = field(default_factory=list)  # allowed differences, stated

    @property
    def verdict(self) -> str:
        if any(r.decision == REGRESSION for r in self.rows):
            return REGRESSION
        if self.rows and not self.untested and all(r.decision == PASS for r in self.rows):
            return PASS
        return INCONCLUSIVE

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    @property
    def confidence(self) -> float:
        return 1 - 2 * self.alpha


def _protocol_differences(base: StoredRun, cand: StoredRun) -> list[dict]:
    """``compare.protocol_differences`` of the pair, named as the gate names its sides."""
    from llmrec.pipelines.results.compare import protocol_differences

    return [{"entry": cand.group, "key": d["key"], "baseline": d["value_a"], "candidate": d["value_b"]}
            for d in protocol_differences(base, cand)]


def gate_row(entry: str, setting: str, metric: str, statistic: str, base, cand, clusters, margin: float,
             alpha: float, lower_is_better: bool, resamples: int, seed: int) -> GateRow:
    """One entry × setting: the estimate, the (1 − 2α) interval and both one-sided p-values against −margin."""
    base, cand = np.asarray(base, float), np.asarray(cand, float)
    sign = -1.0 if lower_is_better else 1.0
    stat = np.mean if statistic == "mean" else np.median
    draws = sign * paired.cluster_bootstrap_diffs(base, cand, clusters, statistic, resamples, seed)
    estimate = sign * float(stat(cand) - stat(base))
    k = len({str(c) for c in clusters})
    lo, hi = (float(q) for q in np.quantile(draws, [alpha, 1 - alpha]))
    p_nw = (1 + np.sum(draws <= -margin)) / (draws.size + 1)
    p_w = (1 + np.sum(draws >= -margin)) / (draws.size + 1)
    note = f"fewer than {MIN_CLUSTERS} clusters" if k < MIN_CLUSTERS else ""
    return GateRow(entry, setting, metric, statistic, int(base.size), k, float(stat(base)), float(stat(cand)),
                   estimate, lo, hi, float(p_nw), float(p_w), note=note)


def run_gate(candidate: str, pin: pin_store.Pin, metric: str, margin: float, alpha: float = 0.05,
             lower_is_better: bool = False, allow_protocol_difference: bool = False, resamples: int = 4000,
             seed: int = 0, data_dir: Path | None = None) -> Gate:
    if margin < 0:
        raise ConfigError(f"--margin {margin}: a margin is a distance, ≥ 0")
    if not 0 < alpha < 0.5:
        raise ConfigError(f"--alpha {alpha}: must lie in (0, 0.5)")
    cand_runs = pin_store.gated_runs(candidate)
    base_runs = pin_store.gated_runs(pin.location)
    pinned = {e.group: e for e in pin.entries}
    for r in base_runs:
        e = pinned.get(r.group)
        now = pin_store.config_hash(r)
        if e is None or e.config_hash != now:
            was = f"config hash {e.config_hash} when pinned, {now} now" if e else "not in the pin"
            raise ConfigError(f"baseline {pin.name!r}: {r.path} is not the run pinned ({was}); pin it again "
                              f"with `llmrec baseline pin {pin.location} --name {pin.name}`")
    gate = Gate(candidate, pin.name, pin.location, metric, margin, alpha, lower_is_better, resamples)
    base_by = {r.group: r for r in base_runs}
    pairs = [(base_by[c.group], c) for c in cand_runs if c.group in base_by]
    gate.untested = sorted({c.group for c in cand_runs} ^ set(base_by))
    if not pairs:
        raise ConfigError(f"the candidate {candidate} and baseline {pin.name!r} share no benchmark entry "
                          f"(candidate: {', '.join(sorted(c.group for c in cand_runs))}; baseline: "
                          f"{', '.join(sorted(base_by))})")
    for b, c in pairs:
        if b.bench.name != c.bench.name:
            raise ConfigError(f"{c.group}: the candidate runs {c.bench.name}, the baseline {b.bench.name}")
        gate.protocol_diff += _protocol_differences(b, c)
    if gate.protocol_diff and not allow_protocol_difference:
        diffs = "; ".join(f"{d['entry']}: {d['key']} {d['baseline']!r} (baseline) → {d['candidate']!r} (candidate)"
                          for d in gate.protocol_diff)
        raise ConfigError(f"the candidate's protocol differs from baseline {pin.name!r} ({diffs}); gate anyway "
                          "with --allow-protocol-difference")
    cache: dict = {}
    for b, c in pairs:
        ob, oc = run_outcomes(b, data_dir, cache), run_outcomes(c, data_dir, cache)
        known = sorted(set(ob["metric"]) & set(oc["metric"]))
        if metric not in known:
            raise ConfigError(f"--metric {metric}: {c.group} has no per-sample outcomes of it; metrics with "
                              f"outcomes: {', '.join(known) or 'none'}")
        merged = ob[ob["metric"] == metric].merge(
            oc[oc["metric"] == metric].drop(columns=["cluster", "statistic"]), on=["sample_id", "setting", "metric"],
            suffixes=("_a", "_b"))
        if merged.empty:
            raise DataError(f"{c.group}: no unit has an outcome of {metric} in both the candidate and the baseline "
                            "(the gate pairs answered samples of the same ids)")
        for setting, g in merged.groupby("setting", sort=True):
            gate.rows.append(gate_row(c.group, str(setting), metric, str(g["statistic"].iloc[0]), g["value_a"],
                                      g["value_b"], g["cluster"].to_numpy(), margin, alpha, lower_is_better,
                                      resamples, seed))
    for r, pnw, pw in zip(gate.rows, paired.holm([r.p_not_worse for r in gate.rows]),
                          paired.holm([r.p_worse for r in gate.rows])):
        r.p_not_worse_holm, r.p_worse_holm = pnw, pw
        if r.note:
            r.decision = INCONCLUSIVE
        elif pw <= alpha:
            r.decision = REGRESSION
        elif pnw <= alpha:
            r.decision = PASS
    return gate


# ---- rendering -------------------------------------------------------------------------------------------------
def _f(v: float, spec: str = "+.4f") -> str:
    return "–" if v is None or not math.isfinite(v) else format(v, spec)


def _p(v: float) -> str:
    return "–" if not math.isfinite(v) else ("<0.001" if v < 0.001 else f"{v:.3f}")


def headline(g: Gate) -> str:
    direction = "lower is better" if g.lower_is_better else "higher is better"
    return (f"candidate {g.candidate} against baseline {g.baseline} ({g.baseline_location}); metric {g.metric} "
            f"({direction}); margin {g.margin:g}: the candidate fails when worse by more than {g.margin:g}; "
            f"alpha {g.alpha:g}; Holm over {len(g.rows)} test(s); {g.confidence:.0%} CI from {g.resamples} cluster "
            "bootstrap draws")


HEADER = ("entry", "setting", "n", "clusters", "baseline", "candidate", "estimate", "CI", "p not worse (Holm)",
          "p worse (Holm)", "decision")


def cells(r: GateRow) -> list[str]:
    return [r.entry, r.setting, str(r.n), str(r.clusters), _f(r.baseline, ".4f"), _f(r.candidate, ".4f"),
            _f(r.estimate), f"[{_f(r.ci_low)}, {_f(r.ci_high)}]", _p(r.p_not_worse_holm), _p(r.p_worse_holm),
            r.decision + (f" ({r.note})" if r.note else "")]


def markdown(g: Gate) -> str:
    """A short summary for a CI job's summary page or a pull-request comment."""
    mark = {PASS: "✅ pass", REGRESSION: "❌ regression", INCONCLUSIVE: "⚠️ not enough evidence"}[g.verdict]
    out = [f"## llmrec gate: {mark}", "", headline(g) + ".", ""]
    out += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |" for r in g.rows]
    if g.untested:
        out += ["", f"Not tested (in only one of the two): {', '.join(g.untested)}."]
    if g.protocol_diff:
        out += ["", "Protocols differ (allowed): " + "; ".join(
            f"{d['entry']}: {d['key']} {d['baseline']!r} → {d['candidate']!r}" for d in g.protocol_diff) + "."]
    return "\n".join(out) + "\n"


def junit(g: Gate) -> str:
    """A JUnit XML report: one test case per entry × setting; a regression is a failure, not enough evidence a
    skipped case (the exit code still says so)."""
    failures = sum(r.decision == REGRESSION for r in g.rows)
    skipped = sum(r.decision == INCONCLUSIVE for r in g.rows)
    root = ET.Element("testsuites", name="llmrec gate", tests=str(len(g.rows)), failures=str(failures),
                      skipped=str(skipped), errors="0")
    suite = ET.SubElement(root, "testsuite", name=f"gate {g.candidate} against {g.baseline}", tests=str(len(g.rows)),
                          failures=str(failures), skipped=str(skipped), errors="0")
    props = ET.SubElement(suite, "properties")
    for k, v in (("metric", g.metric), ("margin", f"{g.margin:g}"), ("alpha", f"{g.alpha:g}"),
                 ("lower_is_better", str(g.lower_is_better).lower()), ("baseline", g.baseline),
                 ("baseline_location", g.baseline_location), ("candidate", g.candidate), ("verdict", g.verdict)):
        ET.SubElement(props, "property", name=k, value=v)
    for r in g.rows:
        case = ET.SubElement(suite, "testcase", classname=f"llmrec.gate.{r.entry}", name=f"{r.metric} · {r.setting}")
        text = (f"metric {r.metric}, margin {g.margin:g}: estimate {_f(r.estimate)} "
                f"{g.confidence:.0%} CI [{_f(r.ci_low)}, {_f(r.ci_high)}], n {r.n}, clusters {r.clusters}, "
                f"baseline {_f(r.baseline, '.4f')}, candidate {_f(r.candidate, '.4f')}, p not worse (Holm) "
                f"{_p(r.p_not_worse_holm)}, p worse (Holm) {_p(r.p_worse_holm)}" + (f"; {r.note}" if r.note else ""))
        if r.decision == REGRESSION:
            ET.SubElement(case, "failure", type="regression", message=f"worse by more than {g.margin:g}: " + text)
        elif r.decision == INCONCLUSIVE:
            ET.SubElement(case, "skipped", message="not enough evidence: " + text)
        ET.SubElement(case, "system-out").text = text
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def as_dict(g: Gate) -> dict:
    return {"verdict": g.verdict, "candidate": g.candidate, "baseline": g.baseline,
            "baseline_location": g.baseline_location, "metric": g.metric, "margin": g.margin, "alpha": g.alpha,
            "lower_is_better": g.lower_is_better, "rows": [asdict(r) for r in g.rows], "untested": g.untested,
            "protocol_diff": g.protocol_diff}


# ---- the CLI ---------------------------------------------------------------------------------------------------
baseline_app = typer.Typer(no_args_is_help=True, help=(
    "Pin a finished run or suite as the reference that `llmrec gate` tests candidates against (kept in the MLflow "
    "store). Not `llmrec baselines`, which trains traditional recommenders."))


@baseline_app.command("pin")
def pin_cmd(
    run_or_suite: str = typer.Argument(..., help="a run or suite directory (local or a storage URI such as s3://…)"),
    name: str = typer.Option(..., "--name", help="the pin's name (pinning a name again moves it)"),
    tracking_uri_: Optional[str] = tracking_uri_option(STORE_HELP + ", where the pin is kept."),
) -> None:
    """Record RUN_OR_SUITE as the baseline NAME: its location, config hash and protocol, per benchmark entry."""
    from rich.console import Console

    with installed_only():
        p = pin_store.pin(run_or_suite, name, tracking_uri_)
    Console().print(f"pinned {p.name}: {p.location} (config {p.config_hash}; {len(p.entries)} entr"
                    f"{'y' if len(p.entries) == 1 else 'ies'}: {', '.join(e.group for e in p.entries)})", markup=False)


@baseline_app.command("list")
def list_cmd(tracking_uri_: Optional[str] = tracking_uri_option()) -> None:
    """The pinned baselines: name, location, config hash, entries, when pinned."""
    from rich.console import Console
    from rich.table import Table

    found = pin_store.pins(tracking_uri_)
    console = Console()
    if not found:
        console.print("no baseline pinned (pin one with `llmrec baseline pin RUN_OR_SUITE --name NAME`)")
        return
    t = Table("name", "location", "config hash", "entries", "pinned")
    for p in found:
        t.add_row(p.name, p.location, p.config_hash, ", ".join(e.group for e in p.entries), p.pinned_at)
    console.print(t)


def gate_cmd(
    candidate: str = typer.Argument(..., help="the candidate run or suite directory (local or s3://…)"),
    against: str = typer.Option(..., "--against", help="the pinned baseline's name (`llmrec baseline list`)"),
    metric: str = typer.Option(..., "--metric", help="the metric tested (one with per-sample outcomes)"),
    margin: float = typer.Option(..., "--margin", min=0.0, help="how much worse the candidate may be and still pass "
                                                                "(in the metric's units)"),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0001, max=0.4999,
                                help="error rate of each decision, after Holm's correction"),
    lower_is_better: bool = typer.Option(False, "--lower-is-better", help="the metric is better when lower "
                                                                          "(e.g. a miss rate)"),
    markdown_out: Optional[Path] = typer.Option(None, "--markdown", help="write the Markdown summary here"),
    junit_out: Optional[Path] = typer.Option(None, "--junit", help="write a JUnit XML report here"),
    allow_protocol_difference: bool = typer.Option(False, "--allow-protocol-difference",
                                                   help="gate a candidate whose protocol differs from the "
                                                        "baseline's (stated in every output)"),
    resamples: int = typer.Option(4000, "--resamples", min=200, help="cluster bootstrap draws"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap draws"),
    data_dir: Optional[Path] = data_dir_option(),
    tracking_uri_: Optional[str] = tracking_uri_option(STORE_HELP + ", where the pin is kept."),
) -> None:
    """Is CANDIDATE worse than the pinned baseline by more than the margin? A paired, cluster-aware non-inferiority
    test per benchmark entry and setting (cluster bootstrap, Holm over the tests).

    Exit 0: not worse anywhere; 4: a regression (worse by more than the margin somewhere); 5: not enough evidence
    either way (or an entry in only one of the two); 2: nothing tested (usage, config, protocol difference)."""
    from rich.console import Console
    from rich.table import Table

    with installed_only():
        pin = pin_store.pinned(against, tracking_uri_)
        # storage URIs (s3://…) are read from fresh local copies, as every read verb reads them
        with storage.local_folders([candidate, pin.location]) as (cand_local, base_local):
            g = run_gate(str(cand_local), replace(pin, location=str(base_local)), metric, margin, alpha,
                         lower_is_better, allow_protocol_difference, resamples, seed, data_dir)
        g.candidate, g.baseline_location = candidate, pin.location
    console = Console()
    console.print(headline(g), markup=False)
    t = Table(*HEADER)
    for r in g.rows:
        t.add_row(*cells(r))
    console.print(t)
    if g.untested:
        console.print(f"not tested (in only one of the two): {', '.join(g.untested)}", markup=False)
    if g.protocol_diff:
        console.print("protocols differ (allowed): " + "; ".join(
            f"{d['entry']}: {d['key']} {d['baseline']!r} → {d['candidate']!r}" for d in g.protocol_diff), markup=False)
    for path, text in ((markdown_out, markdown(g) if markdown_out else ""), (junit_out, junit(g) if junit_out else "")):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            console.print(f"wrote {path}", markup=False)
    console.print(f"gate: {g.verdict}", markup=False)
    raise typer.Exit(g.exit_code)


def register(app: typer.Typer) -> None:
    app.add_typer(baseline_app, name="baseline")
    app.command("gate")(gate_cmd)
