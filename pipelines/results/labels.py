"""People's labels of a run's samples: written by ``llmrec view RUN --annotate``, read by ``llmrec judges RUN --human``.

A label is one JSON line of the run directory's ``labels.jsonl`` (``RunDir.LABELS``; append-only, never read by a
metric): ``who``, ``when`` (UTC, ISO 8601), ``sample_id``, ``decision`` (``verdict``: the whole sample right or
wrong; else one of the benchmark's judged decisions, ``Judged.judge_decisions``), ``unit`` (within the sample; ""
for the sample), ``label`` (``right`` / ``wrong`` for the verdict; the decision's label as text, ``true`` /
``false`` for a yes/no check), ``agree`` (whether the person agreed with what was shown; None when they set a
label without saying), ``comment``, and ``shown`` (the verdict or judge label the person saw). A later label of
the same sample, decision and unit replaces an earlier one when labels are read (:func:`current`); the file keeps
both. CSV export and import (:func:`export_csv`, :func:`import_csv`) carry the same columns.

:class:`Annotator` is the viewer's writing side: a one-time token, the labels of every run in memory, and
:meth:`Annotator.record`, which checks a posted form against the run's samples before it appends.
"""

from __future__ import annotations

import csv
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from llmrec.errors import ConfigError, DataError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.results.stored import StoredRun
from llmrec.rundir import RunDir

VERDICT = "verdict"  # the decision of a whole-sample label: right / wrong
VERDICT_LABELS = ("right", "wrong")
COLUMNS = ("who", "when", "sample_id", "decision", "unit", "label", "agree", "comment", "shown")
MAX_COMMENT = 10_000


def label_text(v) -> str:
    """A label as text: ``true`` / ``false`` for a yes/no, else ``str`` (as ``llmrec.agreement`` compares them)."""
    return str(v).lower() if isinstance(v, bool) else str(v)


def read_labels(run: StoredRun) -> list[dict]:
    """Every label line of the run, in the order written; a line that is not a label object: ``DataError`` naming
    the file and line."""
    where = f"{run.dir.uri}/{RunDir.LABELS}"
    out = []
    for n, line in enumerate(run.dir.labels_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            v = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: line {n} is not JSON ({e})") from e
        if not isinstance(v, dict) or not all(k in v for k in ("sample_id", "decision", "label")):
            raise DataError(f"{where}: line {n} is not a label (needs sample_id, decision, label)")
        out.append(v)
    return out


def current(labels: list[dict]) -> dict[tuple[str, str, str], dict]:
    """The latest label per (sample, decision, unit): a relabel replaces what it relabels."""
    out: dict[tuple[str, str, str], dict] = {}
    for lab in labels:
        out[(str(lab["sample_id"]), str(lab["decision"]), str(lab.get("unit") or ""))] = lab
    return out


def decisions_of(run: StoredRun, row: dict, verdict: str | None) -> list[dict]:
    """What a person can label on a sample: its verdict (when it has one), then each judged decision with the
    judge's label; each ``{decision, unit, shown, options}``."""
    out = []
    if verdict:
        out.append({"decision": VERDICT, "unit": "", "shown": verdict, "options": list(VERDICT_LABELS)})
    if run.bench is not None:
        try:
            got = caps.judge_decisions(run.bench, run.run_config.benchmark, row)
        except Exception:  # noqa: BLE001 - a run whose config does not validate: its verdict only
            got = []
        for d in got:
            shown = label_text(d.label)
            options = ["true", "false"] if isinstance(d.label, bool) or shown in ("true", "false") else [shown]
            out.append({"decision": d.decision, "unit": d.unit, "shown": shown, "options": options})
    return out


def make_label(decisions: list[dict], sample_id: str, decision: str, unit: str, choice: str, label: str,
               comment: str, who: str, when: str | None = None) -> dict:
    """A label line from what a person chose: ``choice`` ``agree`` (the label shown), ``disagree`` (the other of a
    two-way decision) or ``set`` (``label`` as given). ``ValueError`` saying what is wrong."""
    d = next((d for d in decisions if d["decision"] == decision and d["unit"] == unit), None)
    if d is None:
        known = ", ".join(f"{x['decision']}{'/' + x['unit'] if x['unit'] else ''}" for x in decisions) or "none"
        raise ValueError(f"sample {sample_id!r} has no decision {decision!r}{' unit ' + repr(unit) if unit else ''} "
                         f"to label (it has: {known})")
    agree = None
    if choice == "agree":
        label, agree = d["shown"], True
    elif choice == "disagree":
        others = [o for o in (VERDICT_LABELS if decision == VERDICT else ("true", "false")) if o != d["shown"]]
        if len(others) != 1:
            raise ValueError(f"{decision}: disagreeing with {d['shown']!r} does not name a label; set one")
        label, agree = others[0], False
    elif choice == "set":
        label = label.strip()
        if decision == VERDICT and label not in VERDICT_LABELS:
            raise ValueError(f"a sample's label is right or wrong, not {label!r}")
        if not label:
            raise ValueError("no label given")
        agree = label == d["shown"]
    else:
        raise ValueError(f"choice must be agree, disagree or set, not {choice!r}")
    if len(comment) > MAX_COMMENT:
        raise ValueError(f"comment longer than {MAX_COMMENT} characters")
    return {"who": who, "when": when or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "sample_id": sample_id, "decision": decision, "unit": unit, "label": label, "agree": agree,
            "comment": comment, "shown": d["shown"]}


@dataclass
class Annotator:
    """The viewer's labels: writing on (``--annotate``), its token, who labels, the labels of each run by key;
    ``queue``: (run key, sample id) in the order a person should label them (``--queue``)."""

    runs: dict[str, StoredRun]
    who: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    labels: dict[str, list[dict]] = field(default_factory=dict)
    queue: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def open(cls, runs: list[StoredRun], who: str) -> "Annotator":
        remote = [r.dir.uri for r in runs if not r.dir.local]
        if remote:
            raise ConfigError(f"--annotate writes labels into the run directories: {', '.join(remote)} "
                              "is not a local folder (copy it here)")
        if not who.strip():
            raise ConfigError("--who: give a name for the labels")
        return cls({r.key: r for r in runs}, who.strip(), labels={r.key: read_labels(r) for r in runs})

    def __post_init__(self) -> None:
        self._by_sample: dict[tuple[str, str], list[dict]] = {}
        for key, labs in self.labels.items():
            for lab in labs:
                self._by_sample.setdefault((key, str(lab["sample_id"])), []).append(lab)

    def of(self, run_key: str, sample_id: str) -> list[dict]:
        """The sample's current labels (the latest per decision and unit)."""
        return list(current(self._by_sample.get((run_key, sample_id), [])).values())

    def record(self, run_key: str, sample_id: str, decisions: list[dict], form: dict[str, str]) -> dict:
        """Append the label a posted form describes to the run's labels file; ``ValueError`` when it is not one."""
        run = self.runs.get(run_key)
        if run is None:
            raise ValueError(f"no run {run_key!r}")
        lab = make_label(decisions, sample_id, form.get("decision", ""), form.get("unit", ""),
                         form.get("choice", ""), form.get("label", ""), form.get("comment", ""), self.who)
        run.dir.append_labels([json.dumps(lab, ensure_ascii=False)])
        self.labels.setdefault(run_key, []).append(lab)
        self._by_sample.setdefault((run_key, sample_id), []).append(lab)
        return lab


# ---- CSV ------------------------------------------------------------------------------------------------------

def export_csv(run: StoredRun, out: Path) -> int:
    """Every label line of the run as CSV rows (``COLUMNS``); how many."""
    labels = read_labels(run)
    try:
        with open(out, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            for lab in labels:
                w.writerow({**lab, "agree": "" if lab.get("agree") is None else str(lab["agree"]).lower()})
    except OSError as e:
        raise ConfigError(f"--export-labels {out}: cannot write it ({e.strerror or e})") from e
    return len(labels)


def import_csv(run: StoredRun, source: Path, who: str, decisions_by_id: dict[str, list[dict]]) -> int:
    """Append the labels of a CSV file (``COLUMNS``; ``who`` and ``when`` may be empty: ``who`` and now) to the
    run's labels file, each checked against the run's samples first: nothing is written when a row is wrong
    (``DataError`` naming the file and row). ``decisions_by_id``: sample id → what can be labelled on it."""
    try:
        with open(source, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{source}: cannot read it as CSV ({e})") from e
    lines = []
    for n, r in enumerate(rows, 2):  # row 1 is the header
        missing = [c for c in ("sample_id", "decision", "label") if not (r.get(c) or "").strip()]
        if missing:
            raise DataError(f"{source}: row {n}: no {', '.join(missing)}")
        sid = r["sample_id"].strip()
        if sid not in decisions_by_id:
            raise DataError(f"{source}: row {n}: no sample {sid!r} in {run.dir.uri}")
        try:
            lab = make_label(decisions_by_id[sid], sid, r["decision"].strip(), (r.get("unit") or "").strip(), "set",
                             r["label"], r.get("comment") or "", (r.get("who") or "").strip() or who,
                             (r.get("when") or "").strip() or None)
        except ValueError as e:
            raise DataError(f"{source}: row {n}: {e}") from e
        lines.append(json.dumps(lab, ensure_ascii=False))
    if lines:
        run.dir.append_labels(lines)
    return len(lines)


# ---- the queue ------------------------------------------------------------------------------------------------

def jury_disagrees(run: StoredRun, row: dict) -> bool:
    """Whether the jurors of a jury run's row gave different labels to one of its judged decisions."""
    from llmrec.pipelines.runner.judges import JURY_FIELD

    jurors = row.get(JURY_FIELD) or {}
    if len(jurors) < 2 or run.bench is None:
        return False
    try:
        cfg = run.run_config.benchmark
        seen = [{(d.decision, d.unit): label_text(d.label) for d in caps.judge_decisions(run.bench, cfg, {**row, **f})}
                for f in jurors.values() if isinstance(f, dict)]
    except Exception:  # noqa: BLE001 - a row the benchmark cannot read: not ranked first
        return False
    return any(len({s.get(k) for s in seen}) > 1 for k in set().union(*seen)) if seen else False


def _decisions(run: StoredRun, row: dict) -> dict[tuple[str, str], str]:
    return {(d.decision, d.unit): label_text(d.label)
            for d in caps.judge_decisions(run.bench, run.run_config.benchmark, row)}


def rejudge_disagreements(run: StoredRun) -> set[str]:
    """The samples of a rejudge (its config's ``rejudge.source_run``) whose judged decisions differ from the source
    run's judge's ({} for a run that is not a rejudge, or whose source cannot be read)."""
    from llmrec.pipelines.results.stored import open_run

    source = (run.config.get("rejudge") or {}).get("source_run") if isinstance(run.config, dict) else None
    if not source or run.bench is None:
        return set()
    try:
        before = {str(r["sample_id"]): r for r in open_run(source).rows if r.get("status", "ok") == "ok"}
        return {str(r["sample_id"]) for r in run.rows if str(r["sample_id"]) in before
                and _decisions(run, r) != _decisions(run, before[str(r["sample_id"])])}
    except Exception:  # noqa: BLE001 - a source that moved or cannot be read: the queue is only less informed
        return set()


def choose_queue(viewer, n: int, annotator: Annotator, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` samples to label, as (run key, sample id): samples with a verdict that nobody labelled yet, taken a
    setting at a time in turn (stratified), within each setting those where judges disagree first (a jury's jurors,
    or a rejudge and the run it judged again), then in a seeded shuffle."""
    import random

    rng = random.Random(seed)
    idx = viewer.index
    labelled = {(k, str(lab["sample_id"])) for k, labs in annotator.labels.items() for lab in labs}
    rejudged = {key: rejudge_disagreements(run) for key, run in viewer.by_key.items()}
    strata: dict[tuple[str, str], list[tuple[int, float, tuple[str, str]]]] = {}
    for run_key, row_no, sid, setting, verdict in zip(idx["run"], idx["row"], idx["sample_id"], idx["setting"],
                                                      idx["verdict"]):
        if not verdict or verdict == "failed" or (run_key, sid) in labelled:
            continue
        run = viewer.by_key[run_key]
        first = 0 if sid in rejudged[run_key] or jury_disagrees(run, viewer.rows[run_key][int(row_no)]) else 1
        strata.setdefault((run_key, setting), []).append((first, rng.random(), (run_key, sid)))
    lists = [sorted(v) for _, v in sorted(strata.items())]
    out: list[tuple[str, str]] = []
    # disagreements of every setting before the rest, each pass taking one sample per setting
    for want in (0, 1):
        pools = [[x for x in lst if x[0] == want] for lst in lists]
        while len(out) < n and any(pools):
            for pool in pools:
                if pool and len(out) < n:
                    out.append(pool.pop(0)[2])
    return out
