"""``llmrec judges RUN --human``: people's labels (``llmrec view --annotate``) as one more judge.

Per judge of the run (a plain run's judge, or its scorer where nothing is judged; a jury run's verdict and then
each juror, ``judge_agreement.juror_runs``) and per decision the people labelled (``verdict``: the sample right or
wrong; the benchmark's judged decisions): raw agreement, Cohen's kappa with the cluster bootstrap CI and the
confusion matrix (``llmrec.agreement.decision_agreement``, judge = A, people = B), over the units that both have.

Then what the labels would do to the headline metrics: a metric whose per-sample value is the sample's verdict (1
right, 0 wrong: accuracy) is computed again with the people's verdicts in place of the judge's on the labelled
samples, beside its value as stored, with the difference's cluster bootstrap CI. A metric not made of verdicts
(a rate of one judged check, a ranking metric) is named as not recomputed. Labels never change the run's metrics:
this is a reading.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from llmrec.agreement import PAIR_COLUMNS, decision_agreement
from llmrec.errors import DataError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.results.compare import load_run
from llmrec.pipelines.results.judge_agreement import JURY_FIELD, juror_runs
from llmrec.pipelines.results.labels import VERDICT, current, label_text, read_labels
from llmrec.pipelines.results.outcomes import unit_outcomes
from llmrec.pipelines.results.stored import StoredRun
from llmrec.pipelines.results.viewer import explain

HUMAN = "human"


def _judge_labels(run: StoredRun, row: dict) -> dict[tuple[str, str], str]:
    """What a judge (or the scorer) said on a row: its verdict (right / wrong only) and its judged decisions."""
    out = {}
    verdict = explain(run, row).verdict
    if verdict in ("right", "wrong"):
        out[(VERDICT, "")] = verdict
    if caps.judge_stages(run.bench):
        for d in caps.judge_decisions(run.bench, run.run_config.benchmark, row):
            out[(d.decision, d.unit)] = label_text(d.label)
    return out


def human_pairs(judge: StoredRun, labels: dict[tuple[str, str, str], dict]) -> pd.DataFrame:
    """One row (``PAIR_COLUMNS``) per labelled unit the judge also labelled: label_a the judge's, label_b people's."""
    rows = {str(r["sample_id"]): r for r in judge.rows if r.get("status", "ok") == "ok"}
    out = []
    for (sid, decision, unit), lab in labels.items():
        row = rows.get(sid)
        if row is None:
            continue
        said = _judge_labels(judge, row).get((decision, unit))
        if said is None:
            continue
        out.append((decision, sid, unit, caps.cluster(judge.bench, row), said, label_text(lab["label"])))
    return pd.DataFrame(out, columns=PAIR_COLUMNS)


def metric_moves(judge: StoredRun, labels: dict[tuple[str, str, str], dict], data_dir, resamples: int,
                 seed: int) -> list[dict]:
    """Per headline metric: its value over every answered sample as judged, with people's verdicts in place of the
    judge's on the labelled samples, the difference and its cluster bootstrap CI; ``not_recomputed`` says why a
    metric is left as it is."""
    human = {sid: lab["label"] for (sid, decision, unit), lab in labels.items() if decision == VERDICT and not unit}
    out = []
    outcomes = unit_outcomes(judge.bench, judge.run_config.benchmark, judge.rows,
                             data_dir or judge.run_config.data.dir, {}, quiet=True)
    verdicts = {str(r["sample_id"]): explain(judge, r).verdict for r in judge.rows}
    for metric in judge.headline:
        g = outcomes[outcomes["metric"] == metric]
        rec = {"metric": metric, "judge": math.nan, "with_human": math.nan, "diff": math.nan, "ci_low": math.nan,
               "ci_high": math.nan, "n": int(len(g)), "n_labelled": 0, "not_recomputed": None}
        out.append(rec)
        if g.empty:
            rec["not_recomputed"] = "no per-sample outcomes"
            continue
        sids = g["sample_id"].astype(str).to_numpy()
        values = g["value"].astype(float).to_numpy()
        said = np.array([verdicts.get(s) for s in sids], dtype=object)
        decided = np.isin(said, ["right", "wrong"])
        if g["sample_id"].duplicated().any() or not decided.any() or not np.array_equal(
                values[decided], (said[decided] == "right").astype(float)):
            rec["not_recomputed"] = "its per-sample value is not the sample's verdict"
            continue
        new = values.copy()
        lab = np.array([s in human for s in sids])
        new[lab] = [1.0 if human[s] == "right" else 0.0 for s in sids[lab]]
        diff = new - values
        clusters, idx = np.unique(g["cluster"].astype(str).to_numpy(), return_inverse=True)
        sums, counts = np.bincount(idx, weights=diff), np.bincount(idx).astype(float)
        w = np.random.default_rng(seed).multinomial(len(clusters), np.full(len(clusters), 1 / len(clusters)),
                                                    size=resamples)
        boot = (w @ sums) / (w @ counts)
        rec.update(judge=float(values.mean()), with_human=float(new.mean()), diff=float(diff.mean()),
                   ci_low=float(np.quantile(boot, 0.025)), ci_high=float(np.quantile(boot, 0.975)),
                   n_labelled=int(lab.sum()))
    return out


def human_report(path: Path, data_dir=None, resamples: int = 2000, seed: int = 0) -> dict:
    """People's labels of one run against its judge(s): the ``judges.json`` shape of ``judges_report``, its pairs
    each (judge, ``human``), each with ``human_metrics`` (:func:`metric_moves`)."""
    run = load_run(Path(path).resolve(), Path(path).name)
    labels = current(read_labels(run))
    if not labels:
        raise DataError(f"{run.dir.uri}: nobody labelled its samples yet (`llmrec view {path} --annotate`, or "
                        "--import-labels FILE.csv)")
    judges = [run]
    if any(r.get(JURY_FIELD) for r in run.rows):
        judges = [run.with_rows(run.rows, name=f"{run.name} (jury)"), *juror_runs(run)]
    pairs = []
    for j in judges:
        p = human_pairs(j, labels)
        pairs.append({"a": j.name, "b": HUMAN, "paired_samples": int(p["sample_id"].nunique()) if len(p) else 0,
                      "agreement": [d.as_dict() for d in decision_agreement(p, resamples, seed)] if len(p) else [],
                      "metrics": [], "dropped": {}, "judge_failure_rate_a": math.nan,
                      "judge_failure_rate_b": math.nan,
                      "human_metrics": metric_moves(j, labels, data_dir, resamples, seed)})
    people = sorted({str(lab.get("who")) for lab in labels.values()})
    return {"benchmark": run.bench.name, "judges": [{"label": j.name, "run_dir": str(run.path)} for j in judges]
            + [{"label": HUMAN, "who": people, "labels": len(labels)}], "resamples": resamples, "seed": seed,
            "confidence": 0.95, "pairs": pairs}


def human_tables(report: dict) -> list:
    """Rich tables: per judge, agreement with people per decision, then the headline metrics with people's
    verdicts."""
    from rich.table import Table
    from rich.text import Text

    from llmrec.pipelines.common.stats import FEW_LEGEND, few_mark
    from llmrec.pipelines.results.judge_agreement import AGREEMENT_COLUMNS, _fmt, agreement_cells

    out = []
    who = next(j for j in report["judges"] if j["label"] == HUMAN)
    for p in report["pairs"]:
        t = Table(title=f"judge against people: A = {p['a']}, B = people ({', '.join(who['who'])}; "
                        f"{p['paired_samples']} labelled samples; κ: Cohen's kappa, 95% CI: bootstrap over clusters)",
                  expand=False, caption_justify="left",
                  caption="over the labelled units the judge also answered; a later label replaces an earlier one"
                  + (f"\n{FEW_LEGEND}" if any(few_mark(d["n_clusters"]) for d in p["agreement"]) else ""))
        for c in AGREEMENT_COLUMNS:
            name = c.replace("A / B", "judge / people").replace("rows A, columns B", "rows judge, columns people")
            t.add_column(name, justify="left" if c in ("decision", "confusion (rows A, columns B)") else "right")
        for d in p["agreement"]:
            t.add_row(*[Text(c) for c in agreement_cells(d)])
        if not p["agreement"]:
            t.add_row(*[Text("no labelled unit the judge answered")] + [Text("")] * (len(AGREEMENT_COLUMNS) - 1))
        out.append(t)
        m = Table(title=f"headline metrics of {p['a']} with people's verdicts on the labelled samples (95% CI: "
                        "cluster bootstrap)", expand=False)
        for c in ("metric", "as judged", "with people's verdicts", "diff [95% CI]", "labelled / n"):
            m.add_column(c, justify="left" if c == "metric" else "right")
        for r in p["human_metrics"]:
            if r["not_recomputed"]:
                m.add_row(Text(r["metric"]), Text("–"), Text(f"not recomputed: {r['not_recomputed']}"), Text(""),
                          Text(f"– / {r['n']}"))
                continue
            m.add_row(*[Text(x) for x in (r["metric"], _fmt(r["judge"]), _fmt(r["with_human"]),
                                          f"{_fmt(r['diff'], '+.3f')} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]",
                                          f"{r['n_labelled']} / {r['n']}")])
        out.append(m)
    return out
