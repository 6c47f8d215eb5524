"""`llmrec leaderboard`: subject × benchmark headline metrics, with their 95% CIs and sample counts, from run and
suite directories.

A run directory (``RunDir``: what ``llmrec run`` writes) is one entry: its subject is the engine's model (its
config), its benchmark and headline metrics those of ``benchmark.name``. A suite directory (``SuiteDir``) is every
entry of its index (subjects, benchmark entries, ``kind`` llm | baseline), so LLM and baseline results share one
table. The table is tidy (one row per subject, entry and metric, full precision): ``leaderboard.csv``; ``wide``
pivots it to subject rows for ``leaderboard.md`` and the terminal.

Every cell carries its n (the metric's units: the benchmark's per-unit outcomes, else the answered samples) and a
95% CI: the benchmark's own where its metrics hold one, else a cluster bootstrap over the per-unit outcomes,
clustered as the benchmark clusters them (e.g. by user). A cell with n < ``MIN_N`` is marked ``SMALL``: too few
units to rank by; so is one from fewer than ``stats.MIN_CLUSTERS`` clusters. A metric with a chance level
(``<metric>_chance`` in the run's metrics, e.g. an MCQ accuracy) shows it beside the value. Benchmarks are looked up
among the installed ones only: reading results imports nothing.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

import pandas as pd

from llmrec import costs, tracking
from llmrec.config import fingerprint
from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.common.stats import CHANCE, CI_CLUSTERS, FEW, MIN_CLUSTERS, few_clusters
from llmrec.small_samples import finite_number as _number
from llmrec.pipelines.registry import benchmark_config, get_benchmark
from llmrec.pipelines.runner import judge_failures
from llmrec.registry import installed_only
from llmrec.pipelines.results.stored import RunNotReadable, StoredRun, installed_benchmark, open_runs
from llmrec.rundir import RunDir, SuiteDir

log = logging.getLogger(__name__)

COLUMNS = ("subject", "kind", "benchmark", "entry", "metric", "value", "ci_low", "ci_high", "n", "n_clusters",
           "ci_source", "run_dir", "usd_per_1k", "tokens_per_1k",  # the run's cost per 1,000 samples
           "chance",  # the metric's chance level (a uniform random guess's value), where it has one
           "judge_failure_rate", "judge_over",  # a judged metric's judge failure rate, and whether it is too high
           "stopped_early_share")  # a run stopped early by execution.stop_when: the share of its samples it ran
EARLY = "⏹"  # marks a value from a run stopped early by execution.stop_when
MISSING = "—"
MIN_N = 30  # fewer units than this: the cell is marked too small to rank
SMALL = FEW  # also marks a CI from fewer than MIN_CLUSTERS clusters (stats.MIN_CLUSTERS, the one rule for every table)
SMALL_TEXT = f"n < {MIN_N} or fewer than {MIN_CLUSTERS} clusters, too few to rank"
LEGEND = (f"value [95% CI] n=units; {SMALL}: {SMALL_TEXT}; — : not computed; (chance c): a uniform random guess's "
          f"value; {costs.COLUMN}: the run's USD (else tokens) per 1,000 samples; judge failed x%: the judged units "
          f"whose judge answer could not be read ({judge_failures.MARK}: more than the run's "
          f"{judge_failures.CONFIG_KEY}); {EARLY} x%: stopped early by execution.stop_when after x% of its samples")
TAG_LEADERBOARD = "llmrec.leaderboard"  # the MLflow record of one leaderboard (its sources and metrics), kept in place


def _run_entry(run: StoredRun) -> StoredRun:
    """A plain run directory as an entry: it needs a config naming an installed benchmark, and its metrics."""
    if not run.config or not isinstance((run.config.get("benchmark") or {}).get("name"), str):
        raise RunNotReadable(f"{run.dir.uri}: no {RunDir.CONFIG} with benchmark.name, so not a `llmrec run` "
                             f"directory (a baseline result is read through its suite's {SuiteDir.INDEX})")
    run.installed_bench()
    run.metrics  # noqa: B018 - read now: a damaged file is named before the table is built
    return run


def _suite_entries(suite_dir: str | Path, runs: list[StoredRun]) -> list[StoredRun]:
    """A suite's entries that have metrics (a suite still running has none there yet: left out with a warning)."""
    where = f"{suite_dir}/{SuiteDir.INDEX}"
    out = []
    for i, run in enumerate(runs):
        if not run.has_metrics():
            log.warning("%s: entries.%d (%s / %s): no %s in %s yet; left out", where, i, run.subject, run.entry,
                        RunDir.METRICS, run.dir.uri)
            continue
        run.installed_bench(f"{where}: entries.{i}")
        run.metrics  # noqa: B018 - read now, naming a damaged file
        run.config  # noqa: B018
        out.append(run)
    return out


def load_entries(paths: Iterable[str | Path]) -> list[StoredRun]:
    """Every entry of the given run and suite directories, in order. Entries whose subject and benchmark entry
    coincide are told apart by the config keys that differ between them (:func:`distinct_subjects`)."""
    out: list[StoredRun] = []
    for p in paths:
        runs = open_runs([p], needs=(RunDir.METRICS,))
        out += _suite_entries(p, runs) if SuiteDir.is_suite(str(p)) else [_run_entry(r) for r in runs]
    return distinct_subjects(out)


def distinct_subjects(entries: list[StoredRun]) -> list[StoredRun]:
    """Entries whose subject and benchmark entry coincide (three runs of ``prefeval`` by ``llamacpp``) named by the
    config keys whose values differ between them (``llamacpp n_ctx=4096``: ``tracking.differing_labels`` over
    ``run_config.result_sections``); those that still coincide (alike configs) also by their suite's name or, for
    plain runs, their directory's (``llamacpp (prefeval-8a613c27f7a4)``)."""
    from llmrec.pipelines.runner.run_config import result_sections

    same: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(entries):
        same.setdefault((e.subject, e.entry), []).append(i)
    names = {i: e.subject for i, e in enumerate(entries)}
    for group in (g for g in same.values() if len(g) > 1):
        labels = tracking.differing_labels({i: result_sections(entries[i].config or {}) for i in group})
        names.update({i: f"{entries[i].subject} {labels[i]}" if labels[i] else entries[i].subject for i in group})
        seen = Counter(names[i] for i in group)
        names.update({i: f"{names[i]} ({entries[i].suite or entries[i].run_dir.name})" for i in group
                      if seen[names[i]] > 1})
    return [e if names[i] == e.subject else replace(e, subject=names[i]) for i, e in enumerate(entries)]


@dataclass(frozen=True)
class Units:
    """One entry's per-unit outcomes (``PairedOutcomes.paired_outcomes``) and its sample counts."""

    outcomes: pd.DataFrame  # sample_id, setting, cluster, metric, value, statistic
    samples: int | None  # rows in the run's samples file (None: it has none)
    answered: int | None  # of them with status ok


def units(e: StoredRun, data_dir: Path | None = None, cache: dict | None = None) -> Units:
    """The per-unit outcomes of an entry's run (empty where the run kept no samples or the benchmark gives none);
    the benchmark's data is loaded only when its outcomes need it (and is found)."""
    from llmrec.pipelines.results.outcomes import unit_outcomes

    rows = e.samples()
    if rows is None:
        return Units(pd.DataFrame(columns=["sample_id", "setting", "cluster", "metric", "value", "statistic"]),
                     None, None)
    with installed_only():
        bench = get_benchmark(e.benchmark)
        raw = dict(e.config.get("benchmark") or {"name": e.benchmark})
        try:
            bcfg = benchmark_config(raw)
        except ConfigError:  # a config an older llmrec wrote: the benchmark's defaults still give its outcomes
            bcfg = benchmark_config({"name": e.benchmark})
    where = data_dir or (e.config.get("data") or {}).get("dir")
    ok = [r for r in rows if (r.get("status") or "ok") == "ok"]
    return Units(unit_outcomes(bench, bcfg, rows, where, {} if cache is None else cache, quiet=True), len(rows),
                 len(ok))


def _ci(outcomes: pd.DataFrame, metric: str, value: float, bootstrap: bool) -> tuple[float, float, int, int]:
    """(low, high, n, clusters) of a metric's units; low and high: a cluster bootstrap of their statistic, NaN
    unless ``bootstrap`` and the units can carry one: at least two clusters, whose statistic is the run's ``value``
    (units that do not reproduce the metric say nothing of its uncertainty)."""
    import numpy as np

    from llmrec.pipelines.common.paired import cluster_bootstrap_ci1

    g = outcomes[outcomes["metric"] == metric]
    if g.empty:
        return math.nan, math.nan, 0, 0
    clusters = g["cluster"].astype(str).to_numpy()
    values, statistic = g["value"].to_numpy(float), g["statistic"].iloc[0]
    k = len(set(clusters))
    same = math.isclose(float(np.median(values) if statistic == "median" else np.mean(values)), value,
                        rel_tol=1e-6, abs_tol=1e-9)
    if not (bootstrap and k >= 2 and same):
        if bootstrap and k >= 2:
            log.debug("%s: its per-unit outcomes do not reproduce %s; no bootstrap CI", metric, value)
        return math.nan, math.nan, len(g), k
    lo, hi = cluster_bootstrap_ci1(values, clusters, statistic)
    return lo, hi, len(g), k


def _metric(e: StoredRun, key: str) -> float:
    """``_number`` of an entry's metric; one that is there but not a number at all (text, a list) shows as
    ``MISSING`` like one not computed, and a warning names the file and the key, so the two are told apart."""
    v = e.metrics.get(key)
    f = _number(v)
    if math.isnan(f) and v is not None and not isinstance(v, float):
        try:
            float(v)  # "NaN", as some metrics files write an undefined value: not computed
        except (TypeError, ValueError):
            shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:59] + "…"
            log.warning("%s/%s: '%s' is %s, not a number; the leaderboard shows %s for it", e.run_dir,
                        RunDir.METRICS, key, shown, MISSING)
    return f


def leaderboard(sources: Iterable[str | Path] | Iterable[StoredRun], metrics: Iterable[str] | None = None,
                data_dir: Path | None = None) -> pd.DataFrame:
    """The tidy leaderboard of run / suite directories (or of entries ``load_entries`` read): one row per
    subject, benchmark entry and metric with ``COLUMNS`` (``value``, ``ci_low``, ``ci_high`` as floats, NaN
    where there is none; ``n`` the metric's units, NaN where unknown; ``ci_source`` ``benchmark`` or
    ``cluster bootstrap``). ``metrics``: these metric keys of every entry instead of each entry's headline
    metrics (an entry that has none of them is left out)."""
    sources = list(sources)
    entries = sources if all(isinstance(s, StoredRun) for s in sources) else load_entries(sources)
    wanted = list(metrics or [])
    rows, cache = [], {}  # cache: benchmark assets, loaded once for every entry whose outcomes need them
    for e in entries:
        keys = [m for m in wanted if m in e.metrics] if wanted else list(e.headline)
        if not keys:
            continue
        u = units(e, data_dir, cache)
        stored_n = _number(e.metrics.get("n_answered", e.metrics.get("n_samples")))
        per_1k = (_number(e.metrics.get(costs.USD_PER_1K)), _number(e.metrics.get(costs.TOKENS_PER_1K)))
        early = _number(e.metrics.get("stop_when/share_used")) if _number(
            e.metrics.get("stop_when/stopped_early")) == 1 else math.nan
        for m in keys:
            value, lo, hi = (_metric(e, k) for k in (m, f"{m}_ci_low", f"{m}_ci_high"))
            source = "benchmark" if math.isfinite(lo) and math.isfinite(hi) else ""
            want = not source and math.isfinite(value) and not tracking.is_count(m)
            blo, bhi, n, clusters = _ci(u.outcomes, m, value, want)
            if want and math.isfinite(blo):
                lo, hi, source = blo, bhi, "cluster bootstrap"
            if not n:  # no per-unit outcome for the metric: its answered samples (all of them for a count)
                n = (u.samples if tracking.is_count(m) else u.answered) if u.samples is not None else stored_n
                clusters = _number(e.metrics.get(f"{m}{CI_CLUSTERS}"))  # the units its stored CI resampled
            jf = judge_failures.for_metric(e.metrics, m, e.judged)
            judge = (jf.rate, jf.exceeds(e.max_judge_failed_share)) if jf is not None else (math.nan, False)
            rows.append((e.subject, e.kind, e.benchmark, e.entry, m, value, lo, hi, _number(n), _number(clusters),
                         source, str(e.run_dir), *per_1k, _number(e.metrics.get(f"{m}{CHANCE}")), *judge, early))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def fmt(v: float | None) -> str:
    """A value as the tables show it: 3 decimals (whole from 1000 on), ``—`` where there is none."""
    if v is None or not math.isfinite(v):
        return MISSING
    text = f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3f}"
    return "0.000" if text == "-0.000" else text


def small(metric: str, value: float, n: float, clusters: float = math.nan) -> bool:
    """A cell too small to rank: a (non-count) value from fewer than ``MIN_N`` units, or from an unknown number,
    or from fewer than ``stats.MIN_CLUSTERS`` clusters (where the count is known)."""
    return math.isfinite(value) and not tracking.is_count(metric) and (
        not (math.isfinite(n) and n >= MIN_N) or few_clusters(clusters))


def cell(metric: str, value: float, lo: float, hi: float, n: float = math.nan, clusters: float = math.nan,
         chance: float = math.nan, judge_failed: float = math.nan, judge_over: bool = False,
         early: float = math.nan) -> str:
    """``0.412 [0.301, 0.520] n=120``; ``[—]`` where there is no CI; ``n=—`` where the count is unknown; ``†``
    (``SMALL``) when n < ``MIN_N`` or clusters < ``stats.MIN_CLUSTERS``; `` (chance 0.250)`` where the metric has
    a chance level; a count as ``3``; a judged metric with `` judge failed 4%`` (``!`` after it when
    ``judge_over``: above the run's ``execution.max_judge_failed_share``); `` ⏹ 25%`` (``EARLY``) for a run stopped
    early by ``execution.stop_when`` after that share of its samples."""
    if not math.isfinite(value):
        return MISSING
    if tracking.is_count(metric):
        return f"{value:.0f}"
    ci = f"[{fmt(lo)}, {fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else f"[{MISSING}]"
    count = f"n={n:.0f}" if math.isfinite(n) else f"n={MISSING}"
    judge = ""
    if isinstance(judge_failed, (int, float)) and math.isfinite(judge_failed):
        judge = f" judge failed {judge_failed:.0%}" + (judge_failures.MARK if judge_over else "")
    text = f"{fmt(value)} {ci} {count}" + (SMALL if small(metric, value, n, clusters) else "")
    stopped = f" {EARLY} {early:.0%}" if math.isfinite(_number(early)) else ""
    return text + (f" (chance {fmt(chance)})" if math.isfinite(_number(chance)) else "") + judge + stopped


def wide(df: pd.DataFrame, primary_only: bool = False) -> pd.DataFrame:
    """Subject rows (with their kind) × ``entry: metric`` columns of formatted cells (``cell``), LLMs first.
    ``primary_only``: each entry's first metric only (its headline's headline), a subject × benchmark grid. After an
    entry's metrics, its ``cost/1k`` column (the run's USD, else tokens, per 1,000 samples; ``—`` where a run has no
    ledger), for the entries some run of which has one."""
    if primary_only:
        first = df.groupby("entry", sort=False)["metric"].first()
        df = df[df["metric"] == df["entry"].map(first)]
    cols = _with_cost_columns(df, list(dict.fromkeys(zip(df["entry"], df["metric"]))))
    subjects = list(dict.fromkeys(zip(df["kind"], df["subject"])))
    subjects.sort(key=lambda ks: ks[0] != "llm")  # stable: LLMs, then baselines, each in first-seen order
    def column(name: str, default=math.nan) -> pd.Series:  # a tidy frame from an older llmrec may lack it
        return df[name] if name in df else pd.Series(default, index=df.index)

    cells = {(r.kind, r.subject, r.entry, r.metric): cell(r.metric, r.value, r.ci_low, r.ci_high, k, c, ch, jf,
                                                          jo is True or jo == 1, es)
             for r, k, c, ch, jf, jo, es in zip(df.itertuples(), column("n"), column("n_clusters"), column("chance"),
                                                 column("judge_failure_rate"), column("judge_over", False),
                                                 column("stopped_early_share"))}
    if "usd_per_1k" in df:
        cells.update({(r.kind, r.subject, r.entry, costs.COLUMN): costs.per_1k_text(
            {costs.USD_PER_1K: r.usd_per_1k, costs.TOKENS_PER_1K: r.tokens_per_1k}) for r in df.itertuples()})
    absent = _absent_texts(df)
    data = [[s, k] + [cells.get((k, s, e, m), absent.get(e, MISSING) if k == "llm" else MISSING) for e, m in cols]
            for k, s in subjects]
    return pd.DataFrame(data, columns=["subject", "kind"] + [f"{e}: {m}" for e, m in cols])


def _absent_texts(df: pd.DataFrame) -> dict[str, str]:
    """Per entry whose benchmark words a missing result itself (``Benchmark.absent_text``, e.g. "not probed"):
    that text, shown for an LLM subject with no run of the entry."""
    out = {}
    for entry, name in dict(zip(df["entry"], df["benchmark"])).items():
        try:
            text = caps.absent_text(installed_benchmark(str(name), "leaderboard"))
        except ConfigError:
            continue
        if text:
            out[entry] = text
    return out


def _with_cost_columns(df: pd.DataFrame, cols: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``cols`` with an ``(entry, costs.COLUMN)`` after each entry's last metric, for the entries some run of which
    has a cost ledger (older runs have none: no empty column)."""
    if "usd_per_1k" not in df:
        return cols
    costed = set(df.loc[df["usd_per_1k"].notna() | df["tokens_per_1k"].notna(), "entry"])
    last = {entry: i for i, (entry, _) in enumerate(cols)}
    out = []
    for i, (entry, metric) in enumerate(cols):
        out.append((entry, metric))
        if entry in costed and last[entry] == i:
            out.append((entry, costs.COLUMN))
    return out


def markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (``|`` in a cell escaped)."""
    def row(values) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    lines = [row(table.columns), row(["---"] * len(table.columns))] + [row(r) for r in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def file_stem(metrics: Iterable[str] | None = None) -> str:
    """``leaderboard`` (the default, headline metrics), or ``leaderboard.<metric>+<metric>`` for a ``--metric``
    selection: filtered outputs are written beside the default ones, never over them."""
    wanted = list(metrics or [])
    return "leaderboard" + ("." + "+".join(re.sub(r"[^\w.-]+", "_", m) for m in wanted) if wanted else "")


def write(df: pd.DataFrame, out_dir: Path, primary_only: bool = False, stem: str = "leaderboard") -> dict[str, Path]:
    """``<stem>.csv`` (the tidy frame, full precision) and ``<stem>.md`` (``wide``) in ``out_dir``."""
    files = {"csv": out_dir / f"{stem}.csv", "md": out_dir / f"{stem}.md"}
    note = (f"{LEGEND}. Each benchmark's first headline metric; every headline metric: {stem}.csv"
            if primary_only else f"{LEGEND}.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        df.to_csv(files["csv"], index=False)
        files["md"].write_text(f"# Leaderboard\n\n{markdown(wide(df, primary_only))}\n{note}\n")
    except OSError as e:
        raise ConfigError(f"--out {out_dir}: cannot write the leaderboard files ({e.strerror or e})") from e
    return files


def tracking_config(entries: list[StoredRun], uri: str | None = None) -> tracking.TrackingConfig:
    """The tracking section of the first entry whose directory has a config, else the defaults, with the reader's
    own store (``uri``: the verb's ``--tracking-uri``, else the environment's or the default; never the store the
    directory names: ``tracking.reader_section``)."""
    cfg = next((e.config["tracking"] for e in entries if e.config.get("tracking")), None)
    return tracking.reader_section(cfg, uri)


def log_mlflow(df: pd.DataFrame, entries: list[StoredRun], files: dict[str, Path], experiment: str,
               stem: str = "leaderboard", uri: str | None = None) -> str:
    """The MLflow record of this leaderboard (its sources and file stem): created once, then updated in place by
    every later call (metrics logged at the next step, artifacts replaced); a metric per subject, entry and metric
    (``<subject>/<entry>/<metric>``, CI bounds and n beside it), both files as artifacts; returns its id."""
    cfg = tracking_config(entries, uri)
    exp_id = tracking.setup(cfg.uri, experiment, cfg.artifact_root)
    client = tracking.client(cfg.uri)
    sources = sorted({str(e.run_dir) for e in entries})
    key = fingerprint([sources, stem], 16)
    tags = tracking.run_tags("leaderboard", subjects=",".join(dict.fromkeys(df["subject"])),
                             entries=",".join(dict.fromkeys(df["entry"])), **{TAG_LEADERBOARD: key})
    found = client.search_runs([exp_id], filter_string=f"tags.`{TAG_LEADERBOARD}` = '{key}'", max_results=1)
    name = f"leaderboard · {experiment}" + (f" · {stem.split('.', 1)[1]}" if "." in stem else "")
    if found:
        run_id, step = found[0].info.run_id, int(found[0].data.tags.get("llmrec.leaderboard_step", "0")) + 1
        client.update_run(run_id, status="RUNNING", name=name)
        for k, v in tags.items():
            client.set_tag(run_id, k, v)
    else:
        run_id, step = tracking.start_run(client, exp_id, name, {"sources": ",".join(sources)}, tags), 0
    client.set_tag(run_id, "llmrec.leaderboard_step", str(step))
    values = {}
    for r in df.itertuples():
        for suffix, v in (("", r.value), ("_ci_low", r.ci_low), ("_ci_high", r.ci_high), ("_n", r.n),
                          ("_judge_failure_rate", getattr(r, "judge_failure_rate", math.nan))):
            values[f"{r.subject}/{r.entry}/{r.metric}{suffix}"] = v
    tracking.log_metrics(client, run_id, values, step)
    for path in files.values():
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def rich_table(df: pd.DataFrame, primary_only: bool = True, title: str = "leaderboard"):
    """The leaderboard as a rich table (``llmrec leaderboard``, and ``llmrec suite``'s summary): a row per
    subject, LLMs first, baselines in italics; a column per benchmark entry's metric."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, caption_justify="left",
                  caption=LEGEND + ("; every headline metric: leaderboard.csv" if primary_only else ""))
    shown = wide(df, primary_only=primary_only)
    for c in shown.columns:
        table.add_column(Text(c), justify="left" if c in ("subject", "kind") else "right")
    for row in shown.itertuples(index=False):
        table.add_row(*(Text(str(v)) for v in row), style="italic" if row[1] == "baseline" else None)
    return table
