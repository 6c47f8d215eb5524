"""``llmrec judges RUN_A RUN_B`` (two runs judging the same subject outputs, e.g. a run and its ``llmrec rejudge``)
or ``llmrec judges RUN`` (a jury's run: each pair of its judges): how far the judges agree.

Per judged decision (``Judged.judge_decisions``: PrefEval's four checks, GISTBench's evidence and specificity
choices): raw agreement, Cohen's kappa with a bootstrap CI that resamples whole clusters (``Benchmark.cluster``: the
user, PrefEval's preference), the confusion matrix (``llmrec.agreement``); and what the judges' difference does to
the headline metrics: B − A with its paired cluster-bootstrap CI and p-value, as ``llmrec compare`` computes it.

Two runs are paired on the samples both answered whose subject outputs are the same (every call of a stage that
is not a judge stage has the same text in both); the others are counted as dropped.

A judge answer that could not be read is its own outcome (``unreadable``): counted per judge and decision, shown in
the confusion matrix, left out of agreement and kappa, and kappa is refused, with the reason, for a decision where
a judge's answers could not be read for more than half of the units (``llmrec.agreement.MAX_UNREADABLE_SHARE``).
Each judge's failure rate over the paired samples (``Judged.judge_failures``) stands beside its metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from llmrec.agreement import MAX_UNREADABLE_SHARE, PAIR_COLUMNS, decision_agreement
from llmrec.errors import ConfigError, DataError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.results.compare import ALL, judge_cell, judge_failure_rate, load_run, paired_rows, short_settings
from llmrec.pipelines.results.outcomes import unit_outcomes
from llmrec.pipelines.results.stored import StoredRun
from llmrec.pipelines.runner.judges import JURY_FIELD, judge_protocol
from llmrec.rundir import dumps_json


@dataclass
class JudgePair:
    a: str  # judge A: a run's label, or a juror of a jury run
    b: str
    agreement: list[dict] = field(default_factory=list)  # DecisionAgreement.as_dict() per decision
    metrics: list[dict] = field(default_factory=list)  # compare's rows: B − A per metric and setting
    paired_samples: int = 0
    dropped: dict = field(default_factory=dict)
    judge_failure_rate_a: float = math.nan  # share of the paired judged units whose judge A answer was unreadable
    judge_failure_rate_b: float = math.nan


def _subject_texts(run: StoredRun, row: dict) -> list:
    judge = set(caps.judge_stages(run.bench))
    out = []
    for name, calls in sorted((row.get("outputs") or {}).items()):
        if name.split("[", 1)[0] in judge:
            continue
        for c in calls if isinstance(calls, list) else [calls]:
            out.append((name, c.get("text") if isinstance(c, dict) else None))
    return out


def _decisions(run: StoredRun, row: dict) -> dict[tuple[str, str], object]:
    return {(d.decision, d.unit): d.label for d in caps.judge_decisions(run.bench, run.run_config.benchmark, row)}


def _pairs(ra: StoredRun, rows_a: dict, rb: StoredRun, rows_b: dict, ids: list[str]) -> pd.DataFrame:
    out = []
    for sid in ids:
        da, db = _decisions(ra, rows_a[sid]), _decisions(rb, rows_b[sid])
        cluster = caps.cluster(ra.bench, rows_a[sid])
        out += [(k[0], sid, k[1], cluster, da[k], db[k]) for k in da if k in db]
    return pd.DataFrame(out, columns=PAIR_COLUMNS)


def _metric_rows(ra: StoredRun, rb: StoredRun, data_dir, resamples: int, seed: int, cache: dict) -> list[dict]:
    oa = unit_outcomes(ra.bench, ra.run_config.benchmark, ra.rows, data_dir or ra.run_config.data.dir, cache, quiet=True)
    ob = unit_outcomes(rb.bench, rb.run_config.benchmark, rb.rows, data_dir or rb.run_config.data.dir, cache, quiet=True)
    merged = oa.merge(ob.drop(columns=["cluster", "statistic"]), on=["sample_id", "setting", "metric"],
                      suffixes=("_a", "_b"))
    return paired_rows(ra, rb, merged, resamples, seed) if len(merged) else []


def compare_judges(ra: StoredRun, rb: StoredRun, data_dir=None, resamples: int = 2000, seed: int = 0,
                   cache: dict | None = None) -> JudgePair:
    """Agreement of the judges of two runs of one benchmark over the subject outputs they share."""
    if ra.bench.name != rb.bench.name:
        raise ConfigError(f"{ra.name} is {ra.bench.name}, {rb.name} is {rb.bench.name}: judges are compared on "
                          "one benchmark's samples")
    if not caps.judge_stages(ra.bench):
        raise ConfigError(f"benchmark '{ra.bench.name}' declares no judge stages: there is no judge to compare")
    rows_a = {str(r["sample_id"]): r for r in ra.rows if r.get("status", "ok") == "ok"}
    rows_b = {str(r["sample_id"]): r for r in rb.rows if r.get("status", "ok") == "ok"}
    both = [s for s in rows_a if s in rows_b]
    same = [s for s in both if _subject_texts(ra, rows_a[s]) == _subject_texts(rb, rows_b[s])]
    pair = JudgePair(ra.name, rb.name, paired_samples=len(same),
                     dropped={"not_in_both": len(set(rows_a) ^ set(rows_b)), "subject_outputs_differ": len(both) - len(same)})
    if not same:
        raise DataError(f"{ra.name} and {rb.name} share no answered sample with the same subject outputs: judge "
                        "agreement needs one set of answers judged twice (`llmrec rejudge`, or a jury run)")
    pairs = _pairs(ra, rows_a, rb, rows_b, same)
    pair.agreement = [d.as_dict() for d in decision_agreement(pairs, resamples, seed)]
    keep = set(same)
    sub_a = ra.with_rows([r for r in ra.rows if str(r["sample_id"]) in keep])
    sub_b = rb.with_rows([r for r in rb.rows if str(r["sample_id"]) in keep])
    pair.metrics = _metric_rows(sub_a, sub_b, data_dir, resamples, seed, cache if cache is not None else {})
    pair.judge_failure_rate_a, pair.judge_failure_rate_b = judge_failure_rate(sub_a), judge_failure_rate(sub_b)
    return pair


def juror_runs(run: StoredRun) -> list[StoredRun]:
    """A jury run as one run per juror: each row with that juror's judge fields, scored again."""
    jurors = list(dict.fromkeys(j for r in run.rows for j in (r.get(JURY_FIELD) or {})))
    if len(jurors) < 2:
        raise DataError(f"{run.name}: not a jury run (its records hold no '{JURY_FIELD}' of two or more judges); "
                        "give two runs that judged the same subject outputs")
    out = []
    for j in jurors:
        rows = []
        for r in run.rows:
            fields = (r.get(JURY_FIELD) or {}).get(j)
            if fields is None:
                rows.append({**r, "status": "failed"} if r.get("status", "ok") == "ok" else r)
                continue
            row = {**r, **fields}
            try:
                row.update(run.bench.score(run.run_config.benchmark, row))
            except Exception as e:  # noqa: BLE001 - a row the benchmark cannot score without its data
                raise DataError(f"{run.name}: scoring judge {j}'s fields of {r.get('sample_id')}: {e}") from e
            rows.append(row)
        out.append(run.with_rows(rows, name=j))
    return out


def judges_report(paths: list[Path], data_dir=None, resamples: int = 2000, seed: int = 0) -> dict:
    """The agreement of two runs' judges (``paths``: two run directories) or of a jury run's judges (one)."""
    runs = [load_run(Path(p).resolve(), Path(p).name) for p in paths]
    if len(runs) == 1:
        jurors = juror_runs(runs[0])
        pairs = [compare_judges(a, b, data_dir, resamples, seed) for a, b in combinations(jurors, 2)]
        judges = [{"label": j.name, "run_dir": str(runs[0].path)} for j in jurors]
    elif len(runs) == 2:
        pairs = [compare_judges(runs[0], runs[1], data_dir, resamples, seed)]
        judges = [{"label": r.name, "run_dir": str(r.path), "judge": judge_protocol(r.run_config, r.bench)} for r in runs]
    else:
        raise ConfigError(f"{len(runs)} runs: give two runs (their judges compared) or one jury run")
    return {"benchmark": runs[0].bench.name, "judges": judges, "resamples": resamples, "seed": seed,
            "confidence": 0.95, "pairs": [pair.__dict__ for pair in pairs]}


def _fmt(v, spec=".3f") -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def confusion_text(d: dict) -> str:
    """``A\\B false true / false 12 3 / true 1 9`` as lines."""
    labels = d["labels"]
    width = max([len(x) for x in labels] + [len(str(c)) for row in d["confusion"] for c in row] + [3])
    head = "A\\B".ljust(width) + " " + " ".join(lab.rjust(width) for lab in labels)
    rows = [lab.ljust(width) + " " + " ".join(str(c).rjust(width) for c in row)
            for lab, row in zip(labels, d["confusion"])]
    return "\n".join([head, *rows])


def unreadable_text(d: dict) -> str:
    """``0 / 6`` (units whose judge A / B answer could not be read), ``– / –`` for an older judges.json."""
    return f"{d.get('unreadable_a', '–')} / {d.get('unreadable_b', '–')}"


def kappa_text(d: dict) -> str:
    """``0.412 [0.301, 0.520]``, or ``refused: judge B failed 100% of its calls (…)``."""
    if d.get("kappa_refused"):
        return f"refused: {d['kappa_refused']}"
    return f"{_fmt(d['kappa'])} [{_fmt(d['kappa_ci_low'])}, {_fmt(d['kappa_ci_high'])}]"


AGREEMENT_COLUMNS = ("decision", "n (cl.)", "unreadable A / B", "agreement [95% CI]", "κ [95% CI]",
                     "confusion (rows A, columns B)")


def agreement_cells(d: dict) -> list[str]:
    """One decision's row of the agreement table (``AGREEMENT_COLUMNS``)."""
    from llmrec.pipelines.common.stats import few_mark

    few = few_mark(d["n_clusters"])  # a CI from fewer clusters than stats.MIN_CLUSTERS
    return [d["decision"], f"{d['n']} ({d['n_clusters']})", unreadable_text(d),
            f"{_fmt(d['agreement'])} [{_fmt(d['agreement_ci_low'])}, {_fmt(d['agreement_ci_high'])}]{few}",
            kappa_text(d) + ("" if d.get("kappa_refused") else few), confusion_text(d)]


def tables(report: dict) -> list:
    """Rich tables: per judge pair, the agreement per decision, then the metric differences."""
    from rich.table import Table
    from rich.text import Text

    from llmrec.pipelines.common.stats import FEW_LEGEND, few_mark

    out = []
    for p in report["pairs"]:
        rates = ""
        if "judge_failure_rate_a" in p:
            rates = (f"; judge failed: A {_fmt(p['judge_failure_rate_a'], '.0%')}, "
                     f"B {_fmt(p['judge_failure_rate_b'], '.0%')}")
        t = Table(title=f"judge agreement: A = {p['a']}, B = {p['b']} ({p['paired_samples']} samples{rates}; κ: "
                        "Cohen's kappa, 95% CI: bootstrap over clusters)", expand=False, caption_justify="left",
                  caption="agreement and κ: over the units both judges answered readably; unreadable: a judge "
                          "answer that could not be read (its own outcome, never a yes or a no); κ refused when a "
                          f"judge's answers could not be read for more than {MAX_UNREADABLE_SHARE:.0%} of the units"
                          + (f"\n{FEW_LEGEND}" if any(few_mark(d["n_clusters"]) for d in p["agreement"]) else ""))
        for c in AGREEMENT_COLUMNS:
            t.add_column(c, justify="left" if c in ("decision", "confusion (rows A, columns B)") else "right")
        for d in p["agreement"]:
            t.add_row(*[Text(c) for c in agreement_cells(d)])
        out.append(t)
        if p["metrics"]:
            few = any(few_mark(r["n_clusters"]) for r in p["metrics"])
            m = Table(title=f"metrics under each judge, B − A (paired over the same answers; 95% CI: cluster "
                            "bootstrap)", expand=False, caption=FEW_LEGEND if few else None, caption_justify="left")
            judged = any("judge_failure_rate_a" in r for r in p["metrics"])
            for c in ("metric", "A", "B", "diff [95% CI]", "p", "n (cl.)") + (("judge failed A / B",) if judged
                                                                             else ()):
                m.add_column(c, justify="left" if c == "metric" else "right")
            short = short_settings(p["metrics"])  # the setting keys that vary (whole labels in judges.json)
            for r in p["metrics"]:
                name = r["metric"] + ("" if r["setting"] == ALL else f" · {short.get(r['setting'], r['setting'])}")
                cells = [name, _fmt(r["value_a"]), _fmt(r["value_b"]),
                         f"{_fmt(r['diff'], '+.3f')} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]"
                         + few_mark(r["n_clusters"]), _fmt(r["p"]) + few_mark(r["n_clusters"]),
                         f"{r['n_pairs']} ({r['n_clusters']})"] + ([judge_cell(r)] if judged else [])
                m.add_row(*[Text(c) for c in cells])
            out.append(m)
    return out


def write_report(report: dict, out: Path) -> Path:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot create it ({e.strerror or e})") from e
    f = out / "judges.json"
    f.write_text(dumps_json(report) + "\n")
    return f


def mlflow_metrics(report: dict) -> dict[str, float]:
    """``<a>_vs_<b>/<decision>/{agreement,kappa,kappa_ci_low,kappa_ci_high}`` and the metric differences."""
    several = len(report["pairs"]) > 1
    out = {}
    for p in report["pairs"]:
        prefix = f"{p['a']}_vs_{p['b']}/" if several else ""
        for d in p["agreement"]:
            for k in ("agreement", "kappa", "kappa_ci_low", "kappa_ci_high", "n", "unreadable_a", "unreadable_b",
                      "n_read"):
                out[f"{prefix}{d['decision']}/{k}"] = d[k]
        for side in ("a", "b"):
            out[f"{prefix}judge_failure_rate_{side}"] = p[f"judge_failure_rate_{side}"]
        for r in p["metrics"]:
            for k in ("diff", "ci_low", "ci_high", "p"):
                out[f"{prefix}{r['metric']}/{r['setting']}/{k}"] = r[k]
    return out


def log_mlflow(report: dict, run: StoredRun, files: list[Path], uri: str | None = None) -> str | None:
    """One MLflow run (kind ``judges``) in the experiment of ``run``: the agreement and the metric differences. The
    store: ``uri`` (``--tracking-uri``), else the environment's or the default, never the one ``run``'s config names."""
    from llmrec import tracking
    from llmrec.pipelines.results.mlflow_log import log_reading

    tags = tracking.run_tags("judges", {"judges": [j.get("judge") for j in report["judges"]]},
                             benchmark=report["benchmark"])
    names = " vs ".join(j["label"] for j in report["judges"])
    params = {f"judge_{i}": f"{j['run_dir']} ({j['label']})" for i, j in enumerate(report["judges"])}
    return log_reading(run, f"judges · {names}", params, tags, mlflow_metrics(report), files, uri=uri)
