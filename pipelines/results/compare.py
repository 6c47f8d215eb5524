"""``llmrec compare RUN_A RUN_B [RUN_C …]``: paired comparison of runs of one benchmark.

Each run's per-unit outcomes come from its benchmark (``PairedOutcomes.paired_outcomes``: sample, setting,
cluster, metric, value, statistic), computed from the run's result store (``results/``; else
``samples.parquet``). Runs are joined on (``sample_id``, setting, metric): only units answered in
both runs are paired; the others are counted in ``dropped`` (missing in one run, failed in one or
both, or without an outcome in one run, e.g. an unparsable answer a metric leaves out). Every run
after the first is compared with the first (the baseline). For each metric and setting, and for the
settings pooled (``all``) when a metric has several: B − A with a cluster bootstrap CI and a p-value
(``llmrec.pipelines.common.paired``), Holm-adjusted over every row of that metric (its settings ×
the comparisons). A suite directory stands for its entries: they are compared per benchmark entry. Per run, the
caption and comparison.json say how many of its answers the request cache gave from calls made for another run
(``cost.answer_sources``): a run that computed none of its answers says so.

Where it writes: a suite's comparisons go to ``<suite>/comparisons/<A>--vs--<B>/`` (``SuiteDir.COMPARISONS``, where
``llmrec report`` and the viewer find them); run folders compared as such to ``<parent of the first>/comparisons/
<a>--vs--<b>/`` (or ``--out``), never into one of the runs. Benchmarks and engines are looked up among the installed
ones only: what a run's config names is never imported.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from llmrec import storage, tracking
from llmrec.cli_options import RUNS_STORE_HELP, data_dir_option, tracking_uri_option
from llmrec.config import flatten
from llmrec.errors import ConfigError, DataError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.common import paired, stats
from llmrec.pipelines.protocol import Benchmark, protocol_record, setting_of
from llmrec.pipelines.runner import judge_failures
from llmrec.pipelines.results import memorized
from llmrec.pipelines.results.memorized import memorization_splits
from llmrec.pipelines.results.outcomes import run_outcomes
from llmrec.pipelines.results.stored import StoredRun, open_run, open_runs
from llmrec.registry import installed_only
from llmrec.rundir import RunDir, SuiteDir, dumps_json, refuse_inside_runs

ALL = "all"  # the setting label of a metric's settings pooled
LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass
class Comparison:
    runs: list[StoredRun]
    rows: list[dict] = field(default_factory=list)
    per_sample: list[pd.DataFrame] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    protocol_diff: list[dict] = field(default_factory=list)
    allowed_protocol_diff: bool = False
    not_compared: list[str] = field(default_factory=list)  # runs alone in their suite entry
    config_diff: list[dict] = field(default_factory=list)  # config_differences of each B with its A
    settings: dict = field(default_factory=dict)
    memorized: list[dict] = field(default_factory=list)  # headline metrics split by memorized items (memorized.py)
    provenance_diff: list[dict] = field(default_factory=list)  # provenance_differences of each B with its A


def load_run(path: str | Path, name: str | None = None) -> StoredRun:
    """One run directory as compare reads it: its config typed with the installed benchmarks and engines only
    (nothing it names is imported), and its rows; ``RunNotReadable`` naming what is missing or damaged."""
    return _checked(replace(open_run(path), name=name) if name is not None else open_run(path))


def _checked(run: StoredRun) -> StoredRun:
    run.run_config  # noqa: B018 - read now: a config that does not validate is named before any work
    run.installed_bench()
    run.rows  # noqa: B018 - compare pairs samples: a run without them is refused here
    return run


def expand(paths: list[Path]) -> list[StoredRun]:
    """Run directories, and suite directories as their entries (baseline entries, without a config: skipped)."""
    sources = [Path(p).resolve() for p in paths]  # recorded (json, MLflow params) as absolute paths
    runs = [_checked(r) for r in open_runs(sources, needs=(RunDir.CONFIG,)) if r.kind == "llm"]
    first: dict[tuple[str, Path], str] = {}
    for r in runs:  # one run twice in one group (named twice): it would be compared with itself
        key = (r.suite_entry or "", Path(r.path).resolve())
        if key in first:
            raise ConfigError(f"{r.path}: given twice (as {first[key]} and as {r.name}); a run compared "
                              "with itself says nothing: name each run once")
        first[key] = r.name
    names = [r.name for r in runs]  # two runs of one name (e.g. from two output dirs): their paths tell them apart
    return [replace(r, name=str(r.path)) if names.count(r.name) > 1 else r for r in runs]


def config_differences(a: StoredRun, b: StoredRun) -> list[dict]:
    """The keys of the settings that determine results (``RunConfig.semantic``: benchmark, engine, judge, ...)
    whose values differ between run ``a`` and run ``b`` (``engine.n_ctx`` 8192 → 4096), in config order, each
    ``{a, b, key, value_a, value_b}`` (a value one run lacks is None; URLs without credentials)."""
    from llmrec.redact import redacted

    ca, cb = (flatten(redacted(r.run_config.semantic())) for r in (a, b))
    return [{"a": a.name, "b": b.name, "key": k, "value_a": ca.get(k), "value_b": cb.get(k)}
            for k in tracking.differing_keys([ca, cb])]


# ---- provenance: what produced the runs (software, model bytes, machine), shown before anything else ----------------
def provenance_differences(a: StoredRun, b: StoredRun) -> list[dict]:
    """Each field of the runs' provenance records (``provenance.json``) that differs, ``{a, b, key, value_a,
    value_b}`` (``engines.subject.model.sha256``); a run without a record: said once as ``key`` ``provenance``."""
    from llmrec.provenance import differences

    pa, pb = a.provenance, b.provenance
    if not pa or not pb:
        return [] if not pa and not pb else [{"a": a.name, "b": b.name, "key": "provenance", "value_a": bool(pa) or
                                              "no record", "value_b": bool(pb) or "no record"}]
    return [{"a": a.name, "b": b.name, "key": k, "value_a": va, "value_b": vb} for k, va, vb in differences(pa, pb)]


def provenance_lines(diffs: list[dict], recorded: bool = True) -> str:
    """The provenance differences as printed first (``key: A → B`` per B run); ``recorded``: whether any of the
    runs has a record."""
    if not recorded:
        return "provenance: none of the runs has a record (written before provenance.json existed)"
    if not diffs:
        return "provenance: the compared runs were produced by the same software, models and machine"
    lines = ["PROVENANCE DIFFERS (what produced the runs; B vs A):"]
    for (a, b) in dict.fromkeys((d["a"], d["b"]) for d in diffs):
        lines.append(f"  {b} vs {a}:")
        lines += [f"    {d['key']}: {tracking.value_text(d['value_a'], 200)} → "
                  f"{tracking.value_text(d['value_b'], 200)}" for d in diffs if d["a"] == a and d["b"] == b]
    return "\n".join(lines)
# ---- end of provenance ---------------------------------------------------------------------------------------------


def protocol_differences(a: StoredRun, b: StoredRun) -> list[dict]:
    pa, pb = a.protocol, b.protocol
    return [{"a": a.name, "b": b.name, "key": k, "value_a": pa.get(k), "value_b": pb.get(k)}
            for k in sorted(pa.keys() | pb.keys()) if pa.get(k) != pb.get(k)]



def _dropped(a: StoredRun, b: StoredRun, merged: pd.DataFrame, oa: pd.DataFrame, ob: pd.DataFrame) -> dict:
    sa = {str(r["sample_id"]): r.get("status", "ok") for r in a.rows}
    sb = {str(r["sample_id"]): r.get("status", "ok") for r in b.rows}
    both = sa.keys() & sb.keys()
    ok_both = {s for s in both if sa[s] == "ok" and sb[s] == "ok"}
    keys = ["sample_id", "setting", "metric"]
    units = pd.concat([oa[keys], ob[keys]]).drop_duplicates()
    units = units[units["sample_id"].isin(ok_both)]
    paired_n = merged.groupby("metric").size()
    no_outcome = {m: int(len(g) - paired_n.get(m, 0)) for m, g in units.groupby("metric")}
    return {"a": a.name, "b": b.name, "group": b.group, "samples_a": len(sa), "samples_b": len(sb),
            "missing_in_a": len(sb.keys() - sa.keys()), "missing_in_b": len(sa.keys() - sb.keys()),
            "failed_in_a": sum(sa[s] != "ok" and sb[s] == "ok" for s in both),
            "failed_in_b": sum(sa[s] == "ok" and sb[s] != "ok" for s in both),
            "failed_in_both": sum(sa[s] != "ok" and sb[s] != "ok" for s in both),
            "no_outcome": {m: n for m, n in sorted(no_outcome.items()) if n}}


def judge_failure_rate(run: StoredRun, setting: str = ALL) -> float:
    """The share of a run's judged units (of one setting, or all) whose judge answer could not be read
    (``Judged.judge_failures``); NaN when nothing was judged."""
    failed = judged = 0
    for r in run.rows:
        if setting != ALL and setting_of(run.bench, r) != setting:
            continue
        f, n = caps.judge_failures(run.bench, run.run_config.benchmark, r)
        failed, judged = failed + f, judged + n
    return failed / judged if judged else math.nan


def _judge_columns(a: StoredRun, b: StoredRun, metric: str, setting: str) -> dict:
    """``judge_failure_rate_a`` / ``_b`` (and whether each is above its run's ``execution.max_judge_failed_share``)
    for a judged metric; {} for another."""
    if not judge_failures.is_judged(metric, caps.judged_metrics(a.bench)):
        return {}
    out = {}
    for side, run in (("a", a), ("b", b)):
        rate = judge_failure_rate(run, setting)
        limit = run.run_config.execution.max_judge_failed_share
        out[f"judge_failure_rate_{side}"] = rate
        out[f"judge_over_{side}"] = bool(math.isfinite(rate) and rate > 0 and (rate > limit or rate >= 1))
    return out


def paired_rows(a: StoredRun, b: StoredRun, merged: pd.DataFrame, resamples: int, seed: int) -> list[dict]:
    out = []
    for metric, m in merged.groupby("metric", sort=True):
        parts = [(s, g) for s, g in m.groupby("setting", sort=True)]
        if len(parts) > 1:
            parts.append((ALL, m))
        for setting, g in parts:
            statistic = g["statistic"].iloc[0]
            r = paired.paired_compare(g["value_a"].to_numpy(), g["value_b"].to_numpy(), g["cluster"].to_numpy(),
                                      statistic, n_resamples=resamples, seed=seed)
            out.append({"group": b.group, "a": a.name, "b": b.name, "metric": metric, "setting": setting,
                        "statistic": statistic, **asdict(r), **_judge_columns(a, b, metric, setting)})
    return out


def compare_runs(paths: list[Path], allow_protocol_diff: bool = False, resamples: int = 2000, seed: int = 0,
                 data_dir: Path | None = None) -> Comparison:
    every = expand(paths)
    # memorization probe runs given beside runs of another benchmark are context (the memorized-vs-not split of
    # those runs), not runs to compare
    probes = [r for r in every if not r.suite_entry and isinstance(r.bench, caps.ProbesMemory)]
    runs = [r for r in every if r not in probes] if len(probes) < len(every) else every
    groups: dict[str, list[StoredRun]] = {}
    for r in runs:  # suite entries by entry; run directories given as such form one group
        groups.setdefault(r.suite_entry or "", []).append(r)
    for g in groups.values():
        if len({r.bench.name for r in g}) > 1:
            raise ConfigError("runs of different benchmarks cannot be compared: "
                              + ", ".join(f"{r.name} is {r.bench.name}" for r in g))
    if not any(len(g) > 1 for g in groups.values()):
        raise ConfigError(f"nothing to compare: {len(runs)} run(s), no two of one benchmark or suite entry")
    comp = Comparison(runs, allowed_protocol_diff=allow_protocol_diff,
                      settings={"resamples": resamples, "seed": seed, "confidence": 0.95},
                      not_compared=[g[0].name for g in groups.values() if len(g) == 1])
    groups = {k: g for k, g in groups.items() if len(g) > 1}
    for g in groups.values():
        for other in g[1:]:
            comp.provenance_diff += provenance_differences(g[0], other)
            comp.config_diff += config_differences(g[0], other)
            comp.protocol_diff += protocol_differences(g[0], other)
    if comp.protocol_diff and not allow_protocol_diff:
        diffs = "; ".join(f"{d['b']} vs {d['a']}: {d['key']} {d['value_a']!r} → {d['value_b']!r}"
                          for d in comp.protocol_diff)
        raise ConfigError(f"the runs' protocols differ ({diffs}); compare anyway with --allow-protocol-diff")
    cache: dict = {}
    for g in groups.values():
        base = run_outcomes(g[0], data_dir, cache)
        for other in g[1:]:
            ob = run_outcomes(other, data_dir, cache)
            merged = base.merge(ob.drop(columns=["cluster", "statistic"]), on=["sample_id", "setting", "metric"],
                                suffixes=("_a", "_b"))
            comp.dropped.append(_dropped(g[0], other, merged, base, ob))
            comp.rows += paired_rows(g[0], other, merged, resamples, seed)
            comp.per_sample.append(merged.assign(group=other.group, a=g[0].name, b=other.name,
                                                 diff=merged["value_b"] - merged["value_a"]))
    if not comp.rows:
        raise DataError("no unit has an outcome in both runs, nothing to compare ("
                        + "; ".join(f"{d['b']} vs {d['a']}: {d['samples_a']} and {d['samples_b']} samples" for d in
                                    comp.dropped) + "); `llmrec compare` pairs answered samples of the same ids")
    comp.memorized = memorization_splits(every, data_dir, cache, resamples, seed)
    for metric in {r["metric"] for r in comp.rows}:  # Holm per metric: its settings × comparisons
        family = [r for r in comp.rows if r["metric"] == metric]
        for r, p in zip(family, paired.holm([r["p"] for r in family])):
            r["p_holm"] = p
    return comp


def judge_cell(row: dict) -> str:
    """``100%! / 0%``: a judged row's judge failure rates in A and B (``!``: above that run's
    ``execution.max_judge_failed_share``); "" for a row no judge decides."""
    if "judge_failure_rate_a" not in row:
        return ""

    def one(side: str) -> str:
        v = row.get(f"judge_failure_rate_{side}")
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        return f"{v:.0%}" + (judge_failures.MARK if row.get(f"judge_over_{side}") else "")
    return f"{one('a')} / {one('b')}"


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("_") or "run"


def subjects(comp: "Comparison | list[StoredRun]") -> list[str]:
    """The compared subjects, A first: a suite entry's subject, else the run's label."""
    runs = comp.runs if isinstance(comp, Comparison) else comp
    return list(dict.fromkeys(r.name.split("/", 1)[0] if r.suite_entry else r.name for r in runs))


def default_out(paths: list[Path], runs: list[StoredRun], here: Path | None = None) -> Path:
    """Where a comparison is written when ``--out`` is not given: one suite directory →
    ``<suite>/comparisons/<A>--vs--<B>`` (``SuiteDir.COMPARISONS``, read by ``llmrec report``); run folders →
    ``<parent of the first run>/comparisons/<a>--vs--<b>``, beside the runs and never inside one. ``here``: that
    folder's ``comparisons/`` instead (runs read from remote storage)."""
    name = _slug("--vs--".join(subjects(runs)))[:200]
    if here is None and len(paths) == 1 and SuiteDir.is_suite(paths[0]):
        return Path(paths[0]) / SuiteDir.COMPARISONS / name
    return (here or runs[0].path.parent) / RunDir.COMPARISONS / name


def check_out(out: Path, runs: list[StoredRun]) -> Path:
    """``out`` unless it is one of the compared runs or inside one, or inside any other run directory: a comparison
    never writes into its inputs, nor into a run."""
    target = out.resolve()
    for r in runs:
        if target == r.path or r.path in target.parents:
            raise ConfigError(f"--out {out}: inside the compared run {r.path}; a comparison is written beside its "
                              "inputs, never into them (give another folder)")
    refuse_inside_runs(out, "--out")
    return out


def write_files(comp: Comparison, out: Path) -> dict[str, Path]:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot create it ({e.strerror or e})") from e
    doc = {"runs": [{"label": r.name, "run_dir": str(r.path), "group": r.group, "benchmark": r.bench.name,
                     "engine": r.run_config.engine.type,
                     "model": r.run_config.engine.label, "answers": r.sources["answers"],
                     "answers_from_cache": r.sources["from_cache"],
                     "answers_from_other_runs": r.sources["from_other_runs"]} for r in comp.runs],
            "provenance_diff": comp.provenance_diff, "config_diff": comp.config_diff,
           "protocol_diff": {"allowed": comp.allowed_protocol_diff, "differences": comp.protocol_diff},
           "dropped": comp.dropped, "not_compared": comp.not_compared, "holm": "per metric, over its settings and comparisons",
           **comp.settings, "rows": comp.rows, **({"memorized": comp.memorized} if comp.memorized else {})}
    files = {"comparison": out / "comparison.json", "per_sample": out / "per_sample.parquet"}
    files["comparison"].write_text(dumps_json(doc) + "\n")
    cols = ["group", "a", "b", "sample_id", "setting", "cluster", "metric", "statistic", "value_a", "value_b", "diff"]
    per = pd.concat(comp.per_sample, ignore_index=True) if comp.per_sample else pd.DataFrame(columns=cols)
    per[cols].to_parquet(files["per_sample"], index=False)
    return files


def metric_prefix(comp: Comparison, row: dict) -> str:
    """MLflow key prefix of a row: its group and B run when there are several of them."""
    parts = [row["group"]] if len({r["group"] for r in comp.rows}) > 1 else []
    parts += [row["b"]] if len({(r["group"], r["b"]) for r in comp.rows}) > 1 else []
    return "".join(f"{p}/" for p in parts)


def log_mlflow(comp: Comparison, files: dict[str, Path], enabled: bool | None = None,
               uri: str | None = None) -> str | None:
    """One MLflow run (kind ``compare``) in the experiment of the last run: params = the run directories,
    metrics = each row's diff, CI and p-values, artifacts = the two files. ``enabled`` / ``uri``: the verb's
    ``--tracking/--no-tracking`` (default: the last run's tracking.enabled) and ``--tracking-uri`` (default: the
    environment's or the default store, never the one a run's config names)."""
    from llmrec.pipelines.results.mlflow_log import log_reading

    last = comp.runs[-1]
    tags = tracking.run_tags("compare", protocol_record(last.bench, last.run_config.benchmark),
                             benchmark=last.bench.name,
                             **{"llmrec.protocol_diff": "allowed" if comp.protocol_diff else "none"})
    params = {f"run_{LETTERS[i] if i < len(LETTERS) else i}": str(r.path) for i, r in enumerate(comp.runs)}
    params.update(allow_protocol_diff=comp.allowed_protocol_diff, **comp.settings)
    metrics = {}
    for row in comp.rows:
        key = f"{metric_prefix(comp, row)}{row['metric']}/{row['setting']}"
        metrics.update({f"{key}/{k}": row[k] for k in ("diff", "ci_low", "ci_high", "p", "p_holm",
                                                        "judge_failure_rate_a", "judge_failure_rate_b",
                                                        "n_clusters") if k in row})
    return log_reading(last, mlflow_name(comp), params, tags, metrics, files.values(), enabled, uri)


def mlflow_name(comp: Comparison) -> str:
    """``compare · gemma vs gemma-grammar`` (the subjects; a suite's entries counted when there are several)."""
    names = subjects(comp)
    groups = {r["group"] for r in comp.rows}
    entries = f" ({len(groups)} entries)" if len(groups) > 1 else (f" · {next(iter(groups))}" if any(
        r.suite_entry for r in comp.runs) and groups else "")
    return f"compare · {names[0]} vs {', '.join(names[1:]) or names[0]}{entries}"


def _fmt(v, spec: str = ".4f") -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def short_settings(rows: list[dict]) -> dict[str, str]:
    """Setting label → the ``key=value`` parts that vary among the labels (the table's column; the files
    keep whole labels). Labels not of that form stay whole."""
    labels = sorted({r["setting"] for r in rows} - {ALL})
    parts = [lab.split(",") for lab in labels]
    if len(labels) < 2 or any("=" not in x for p in parts for x in p) or len({len(p) for p in parts}) > 1:
        return {lab: lab for lab in labels} | {ALL: ALL}
    varying = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
    return {lab: ",".join(p[i] for i in varying) for lab, p in zip(labels, parts)} | {ALL: ALL}


def fmt_p(v) -> str:
    """A p-value as people read it: ``1.00``, ``0.043``, ``<0.001``; ``–`` where there is none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return "<0.001" if v < 0.001 else f"{v:.3f}" if v < 0.01 else f"{v:.2f}"


TESTS = {"mcnemar-exact": "exact McNemar", "permutation-cluster": "paired permutation (clusters swapped)",
         "permutation": "paired permutation", "none": "none (no variation)"}


def tests_used(rows: list[dict]) -> list[str]:
    return [TESTS.get(t, t) for t in dict.fromkeys(r["test"] for r in rows)]


def comparison_keys(comp: Comparison) -> dict[tuple[str, str], str]:
    """(group, B) → its short name in the table (``#1``…) when a table holds several comparisons."""
    pairs = list(dict.fromkeys((r["group"], r["b"]) for r in comp.rows))
    return {p: f"#{i}" for i, p in enumerate(pairs, 1)} if len(pairs) > 1 else {}


def few_mark(row: dict) -> str:
    """``stats.FEW`` when a row's CI and p-value come from fewer than ``stats.MIN_CLUSTERS`` clusters."""
    return stats.few_mark(row.get("n_clusters"))


def table(comp: Comparison):
    """The comparison as a table fitted to the terminal: per metric (and setting) A | B | diff [95% CI] | p |
    p_holm | n (units / clusters); the test in the title; several comparisons told apart by ``#k`` (legend in the
    caption); long metric names wrap."""
    from rich.table import Table
    from rich.text import Text

    keys = comparison_keys(comp)
    t = Table(title=f"paired comparison, B − A (95% CI: cluster bootstrap; test: {', '.join(tests_used(comp.rows))})",
              caption_justify="left", caption=_caption(comp, keys), expand=False)
    if keys:
        t.add_column("cmp", no_wrap=True)
    t.add_column("metric", overflow="fold", min_width=14)
    judged = any("judge_failure_rate_a" in r for r in comp.rows)
    for c in ("A", "B", "diff [95% CI]", "p", "p_holm", "n (cl.)") + (("judge failed A / B",) if judged else ()):
        t.add_column(c, justify="right", no_wrap=c != "diff [95% CI]")  # numbers stay whole; a narrow terminal
        # wraps the metric, and the CI below its diff
    short = short_settings(comp.rows)
    for r in comp.rows:
        name = r["metric"] + ("" if r["statistic"] == "mean" else f" ({r['statistic']})")
        if r["setting"] != ALL or len({x["setting"] for x in comp.rows if x["metric"] == r["metric"]}) > 1:
            name += f" · {short[r['setting']]}"
        cells = ([keys[(r["group"], r["b"])]] if keys else []) + [
            name, _fmt(r["value_a"], ".3f"), _fmt(r["value_b"], ".3f"),
            f"{_fmt(r['diff'], '+.3f')} [{_fmt(r['ci_low'], '.3f')}, {_fmt(r['ci_high'], '.3f')}]{few_mark(r)}",
            fmt_p(r["p"]) + few_mark(r), fmt_p(r["p_holm"]) + few_mark(r), f"{r['n_pairs']} ({r['n_clusters']})"]
        if judged:
            cells.append(judge_cell(r))
        t.add_row(*[Text(c) for c in cells])
    return t


def config_lines(comp: Comparison) -> str:
    """What the compared runs' configs differ in, printed before the table: per B run, ``key A → B`` for each
    setting that determines results (``comparison.json``: ``config_diff``)."""
    pairs: dict[tuple[str, str], list[dict]] = {}
    for d in comp.config_diff:
        pairs.setdefault((d["a"], d["b"]), []).append(d)
    compared = [(g, r) for g in _groups(comp) for r in g[1:]]
    if not pairs:
        return "configs: the compared runs differ in no setting that determines results"
    lines = ["configs differ (B vs A, the settings that determine results):"]
    for g, r in compared:
        diffs = pairs.get((g[0].name, r.name), [])
        what = "; ".join(f"{d['key']} {tracking.value_text(d['value_a'])} → {tracking.value_text(d['value_b'])}"
                         for d in diffs) or "none"
        lines.append(f"  {r.name} vs {g[0].name}: {what}")
    return "\n".join(lines)


def _groups(comp: Comparison) -> list[list[StoredRun]]:
    groups: dict = {}
    for r in comp.runs:  # each group (a suite entry, or the runs given) compares its runs with its first
        groups.setdefault(r.group, []).append(r)
    return [g for g in groups.values() if len(g) > 1]


def _caption(comp: Comparison, keys: dict | None = None) -> str:
    groups: dict = {}
    for r in comp.runs:  # each group (a suite entry, or the runs given) compares its runs with its first
        groups.setdefault(r.group, []).append(r)
    if keys:
        lines = [f"{k}: A = {a}, B = {b}" for (g, b), k in keys.items()
                 for a in {x["a"] for x in comp.rows if x["group"] == g and x["b"] == b}]
    else:
        lines = [f"A = {g[0].name}" + "".join(f"; B = {r.name}" for r in g[1:]) for g in groups.values()
                 if len(g) > 1]
    for d in comp.dropped:
        parts = [f"{k.replace('_', ' ')} {d[k]}" for k in ("missing_in_a", "missing_in_b", "failed_in_a",
                                                             "failed_in_b", "failed_in_both") if d[k]]
        parts += [f"no outcome for {m} in one run {n}" for m, n in d["no_outcome"].items()]
        lines.append(f"dropped ({d['b']} vs {d['a']}): " + (", ".join(parts) if parts else "none"))
    if comp.not_compared:
        lines.append(f"not compared (alone in their suite entry): {', '.join(comp.not_compared)}")
    lines.append(other_runs_line(comp.runs))
    if comp.protocol_diff:
        keys = sorted({d["key"] for d in comp.protocol_diff})
        lines.append(f"PROTOCOLS DIFFER (compared with --allow-protocol-diff): {', '.join(keys)}")
    if any(k != v for k, v in short_settings(comp.rows).items()):
        lines.append("metric · setting: the setting keys that vary (whole labels in comparison.json)")
    if any("judge_failure_rate_a" in r for r in comp.rows):
        lines.append(f"judge failed A / B: each run's judged units whose judge answer could not be read "
                     f"({judge_failures.MARK}: more than its {judge_failures.CONFIG_KEY}); a judged difference with a "
                     "high rate says little")
    lines.append("n (cl.): paired units (clusters); test: exact McNemar for binary outcomes with one pair per cluster, "
                 "else a paired permutation test swapping A/B within clusters; p_holm: Holm per metric")
    if any(few_mark(r) for r in comp.rows):
        lines.append(stats.FEW_LEGEND)
    return "\n".join(lines)


def other_runs_line(runs: list[StoredRun]) -> str:
    """How many of each run's answers the request cache gave from calls made for another run (not computed by it)."""
    parts = []
    for r in runs:
        n = r.sources
        parts.append(f"{r.name} {n['from_other_runs']} of {n['answers']}"
                     + (" (ALL: this run computed none of them)" if n["answers"] and n["from_other_runs"] == n["answers"]
                        else ""))
    return "answers from other runs' calls (request cache): " + "; ".join(parts)


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare_cmd(
        runs: list[str] = typer.Argument(..., help="run directories (or suite directories; local or storage "
                                                   "URIs such as s3://…); the first is the baseline A, each other "
                                                   "one is compared with it"),
        metric: list[str] = typer.Option([], "--metric", help="compare only these metrics (repeatable; default: "
                                                              "every headline metric with per-sample outcomes)"),
        allow_protocol_diff: bool = typer.Option(False, "--allow-protocol-diff",
                                                 help="compare runs whose protocol tags differ (said in the output)"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default: a suite: "
                                                               "<suite>/comparisons/<A>--vs--<B>, where `llmrec "
                                                               "report` finds it; runs: <parent of the first run>/"
                                                               "comparisons/<a>--vs--<b>; remote runs: ./comparisons/"
                                                               "<a>--vs--<b>); never inside a compared run"),
        resamples: int = typer.Option(2000, "--resamples", min=100, help="bootstrap resamples"),
        seed: int = typer.Option(0, "--seed", help="seed of the bootstrap and permutation draws"),
        data_dir: Optional[Path] = data_dir_option(),
        track: Optional[bool] = typer.Option(None, "--tracking/--no-tracking",
                                             help="Log the comparison to MLflow (default: the runs' tracking.enabled)."),
        tracking_uri_: Optional[str] = tracking_uri_option(RUNS_STORE_HELP),
    ) -> None:
        """Paired comparison of runs of one benchmark on the samples they share: per headline metric and
        setting, B − A with a cluster bootstrap 95% CI, an exact McNemar or paired permutation p-value and
        Holm's correction. Writes comparison.json and per_sample.parquet and logs an MLflow run."""
        refuse_inside_runs(out, "--out")
        with storage.local_folders(runs) as local, installed_only():
            remote = any(storage.is_uri(r) for r in runs)
            _compare(local, metric, allow_protocol_diff, out, resamples, seed, data_dir, Path(".") if remote else None,
                     track, tracking_uri_)


def memorized_table(splits: list[dict]):
    """Each subject's headline metrics split by the items its memorization probe found memorized (``memorized``)."""
    from rich.table import Table

    t = Table(title="memorized vs not", caption=memorized.CAPTION)
    for h in memorized.HEADER:
        t.add_column(h, overflow="fold")
    for s in splits:
        t.add_row(*memorized.cells(s))
    return t


def _compare(runs: list[Path], metric: list[str], allow_protocol_diff: bool, out: Path | None, resamples: int, seed: int,
             data_dir: Path | None, here: Path | None, track: bool | None = None, uri: str | None = None) -> None:
    from rich.console import Console

    comp = compare_runs(runs, allow_protocol_diff, resamples, seed, data_dir)
    if metric:
        unknown = sorted(set(metric) - {r["metric"] for r in comp.rows})
        if unknown:
            raise ConfigError(f"--metric {', '.join(unknown)}: not compared; compared metrics: "
                              + ", ".join(sorted({r["metric"] for r in comp.rows})))
        comp.rows = [r for r in comp.rows if r["metric"] in metric]
        comp.per_sample = [p[p["metric"].isin(metric)] for p in comp.per_sample]
    files = write_files(comp, check_out(out or default_out(runs, comp.runs, here), comp.runs))
    console = Console()  # the terminal's width (80 columns, or $COLUMNS, when not a terminal)
    console.print(provenance_lines(comp.provenance_diff, any(r.provenance for r in comp.runs)), markup=False)  # first: what produced the runs
    console.print(config_lines(comp), markup=False)
    console.print(table(comp))
    if comp.memorized:
        console.print(memorized_table(comp.memorized))
    console.print(f"wrote {files['comparison']} and {files['per_sample']}", markup=False)
    run_id = log_mlflow(comp, files, track, uri)
    if run_id:
        console.print(f"MLflow run {run_id} (kind compare)", markup=False)
    _judge_agreement(comp, console, files["comparison"].parent, resamples, seed, data_dir)


def _judge_agreement(comp: Comparison, console, out: Path, resamples: int, seed: int, data_dir: Path | None) -> None:
    """Runs that judged the same subject outputs with different judges (a run and its `llmrec rejudge`): the
    judges' agreement too (``results.judge_agreement``), printed and written as ``judges.json`` beside the rest."""
    from llmrec.pipelines.results.judge_agreement import compare_judges, tables, write_report

    pairs = []
    for a in comp.runs[:1]:
        for b in comp.runs[1:]:
            if not caps.judge_stages(a.bench) or a.bench.name != b.bench.name or not any(
                    d["key"].startswith("judge.") for d in comp.protocol_diff if d["b"] == b.name):
                continue
            try:
                pairs.append(compare_judges(a, b, data_dir, resamples, seed))
            except (DataError, ConfigError):
                continue  # not the same subject outputs: nothing to say about the judges
    if pairs:
        report = {"benchmark": comp.runs[0].bench.name, "judges": [{"label": r.name, "run_dir": str(r.path)}
                                                                   for r in comp.runs],
                  "resamples": resamples, "seed": seed, "confidence": 0.95, "pairs": [p.__dict__ for p in pairs]}
        for t in tables(report):
            console.print(t)
        console.print(f"wrote {write_report(report, out)}", markup=False)
