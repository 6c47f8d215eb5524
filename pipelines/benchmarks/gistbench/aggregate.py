"""A run's stored samples → categories, oracle, metrics, plots and the predictions file.

Per-user scores need the oracle, which depends on every model, so they are computed here
(not per sample). The union oracle of a single run only holds this run's verified
categories (then IG_R = IG_P); pass other models' predictions (``scoring.oracle_predictions``)
or an oracle file (``scoring.oracle_path``) for a meaningful IG recall.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path

from llmrec.pipelines.benchmarks.gistbench import scoring, taxonomy
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.benchmarks.gistbench.predictions import ContractLine, lines_from_rows, read_lines, supplied_oracle
from llmrec.pipelines.benchmarks.gistbench.samples import resolve_path
from llmrec.pipelines.common import reask
from llmrec.pipelines.common.jsonio import read_predictions
from llmrec.pipelines.protocol import Outcome, setting_label

log = logging.getLogger(__name__)


def _is_ok(r: dict) -> bool:
    return r.get("status", "ok") == "ok" and "interests_scored" in r


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if _is_ok(r)]


def run_mappings(ok: list[dict]) -> dict[str, int]:
    """The llm mappings this run's stages produced, one per name: the first row's (sample order) wins."""
    out: dict[str, int] = {}
    for r in ok:
        for name, cat in (r.get("categories") or {}).items():
            out.setdefault(name, int(cat))
    return out


def resolve_categories(rows: list[dict]) -> list[list[dict] | None]:
    """Interest records per row (None for failed rows) with final categories.

    Runs on the driver, the only process that opens the shared cache: this run's new llm
    mappings are committed to it first (earlier runs' entries are kept: first writer wins), then
    the cache's entry wins for every name (one mapping per name for every model and user); the
    embedding mapper maps what it lacks. Idempotent: aggregation and predictions both call it."""
    ok = _ok(rows)
    if not ok:
        return [None] * len(rows)
    ref = ok[0]["taxonomy_ref"]
    names = sorted({rec["interest"] for r in ok for rec in r["interests_scored"]})
    final: dict[str, int] = {}
    if ref["mapper"] != "none":
        cache = taxonomy.TaxonomyCache(ref["cache_path"], ref["namespace"]) if ref.get("cache_path") else None
        if cache is not None and ref["mapper"] == "llm":
            cache.put_many(run_mappings(ok))
        final = cache.get_many(names) if cache is not None else {}
        missing = [n for n in names if n not in final]
        if ref["mapper"] == "embedding" and missing:
            categories = taxonomy.load_categories(Path(ref["taxonomy_path"]))
            model = Path(ref["embedding_model"]) if ref.get("embedding_model") else None
            mapped = taxonomy.EmbeddingMapper(categories, model).map(missing)
            final.update(cache.put_many(mapped) if cache is not None else mapped)
    out = []
    for r in rows:
        if not _is_ok(r):
            out.append(None)
            continue
        recs = []
        for rec in r["interests_scored"]:
            cat = final.get(rec["interest"], rec["category_id"])
            recs.append({**rec, "category_id": taxonomy.OTHER if cat is None else cat})
        out.append(recs)
    return out


def _per_user(rows: list[dict], recs: list[list[dict] | None]) -> dict[tuple, list[dict]]:
    return {(r["dataset"], r["user_id"]): rr for r, rr in zip(rows, recs) if rr is not None}


def build_oracle(cfg: GistbenchConfig, per_user: dict[tuple, list[dict]], data_dir: Path | None) -> tuple[dict, bool]:
    sc = cfg.scoring
    own = scoring.union_oracle(per_user.items())
    if sc.oracle_path is not None:
        oracle = supplied_oracle(str(resolve_path(sc.oracle_path, data_dir)), list(per_user))
        if sc.oracle_merge:
            oracle = {k: oracle.get(k, set()) | own.get(k, set()) for k in set(oracle) | set(own)}
        return oracle, True
    oracle = defaultdict(set, own)
    for path in sc.oracle_predictions:
        for users in read_lines(read_predictions(resolve_path(path, data_dir), ContractLine)).values():
            for key, recs in users.items():
                oracle[key] |= scoring.verified_categories(recs)
    if not sc.oracle_predictions:
        log.info("gistbench: union oracle of this run only (IG_R equals IG_P); see scoring.oracle_predictions")
    return dict(oracle), False


def _extras(rows: list[dict], recs: list[list[dict]]) -> dict[str, float]:
    ok = _ok(rows)
    chunks = sum(r.get("n_chunks", 0) for r in ok)
    flat = [x for rr in recs if rr for x in rr]
    return {"users_failed": float(len(rows) - len(ok)), "failed_chunks": float(sum(r.get("failed_chunks", 0) for r in ok)),
            "chunk_failure_rate": sum(r.get("failed_chunks", 0) for r in ok) / chunks if chunks else math.nan,
            "taxonomy_other_rate": sum(1 for x in flat if x["category_id"] == taxonomy.OTHER) / len(flat) if flat else math.nan,
            # names answered by the shared cache (read on the driver at planning) vs. mapped by this run's calls
            "taxonomy_cache_hits": float(sum(r.get("taxonomy_hits", 0) for r in ok)),
            "taxonomy_mapped": float(sum(len(r.get("categories") or {}) for r in ok)),
            "interests_per_user": len(flat) / len(ok) if ok else math.nan}


JUDGE_FIELDS = ("judge", "overlap", "specificity")  # the judge stages' question states (common.reask)


def judge_failures(row: dict) -> tuple[int, int]:
    """(judge questions given up as unreadable, judge questions asked) of one answered user: the IG filter, the
    overlap filter and the IS questions. A given-up question counts by the reference's rule (no evidence kept,
    the whole pool kept, IS correct = 0); the rate makes it visible beside the scores."""
    if not _is_ok(row):
        return 0, 0
    t = reask.tally(st for f in JUDGE_FIELDS for st in reask.states(row, f).values())
    return t.missed, t.questions


def _judge_metrics(cfg: GistbenchConfig, rows: list[dict]) -> dict[str, float]:
    """``judge_failure_rate`` (questions given up / asked), ``judge_failed`` and ``n_judged``; none without a
    judge (``judge.enabled: false``)."""
    if not cfg.judge.enabled:
        return {}
    failed, asked = (sum(x) for x in zip(*[judge_failures(r) for r in rows])) if rows else (0, 0)
    return {"judge_failed": float(failed), "n_judged": float(asked),
            "judge_failure_rate": failed / asked if asked else math.nan}


def _scored(cfg: GistbenchConfig, rows: list[dict]):
    """(interest records per row, per-user records, the oracle, whether it was supplied)."""
    recs = resolve_categories(rows)
    per_user = _per_user(rows, recs)
    data_dir = Path(rows[0]["data_dir"]) if rows and rows[0].get("data_dir") else None
    oracle, supplied = build_oracle(cfg, per_user, data_dir)
    return recs, per_user, oracle, supplied


def _metrics_of(cfg: GistbenchConfig, rows: list[dict]) -> tuple[dict[str, float], list[dict]]:
    recs, per_user, oracle, supplied = _scored(cfg, rows)
    sc = cfg.scoring
    out = scoring.metrics(per_user, oracle, supplied, sc.category_specificity, sc.bootstrap, sc.confidence, sc.seed)
    out.update(_extras(rows, recs))
    out.update(_judge_metrics(cfg, rows))
    scores, _ = scoring.score_users(per_user, oracle, supplied, sc.category_specificity)
    return out, scores


PAIRED = {"ig_f1_median": "ig_f1", "is_median": "is", "hm_median": "hm"}


def paired_outcomes(cfg: GistbenchConfig, rows: list[dict], group_keys: tuple[str, ...]) -> list[Outcome]:
    """Per-user IG_F1, IS and HM, whose MEDIAN over users the headline metrics are (``statistic``
    "median"), per chunk size; the user is the unit and the cluster. Each run's users are scored
    against that run's oracle, as its metrics are (a union oracle of a single run holds only its own
    verified categories: pass ``scoring.oracle_predictions`` / ``oracle_path`` for a shared one)."""
    by_size: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        if _is_ok(r):
            by_size[r.get("chunk_size")].append(r)
    out = []
    for rs in by_size.values():
        _, per_user, oracle, supplied = _scored(cfg, rs)
        scores, _ = scoring.score_users(per_user, oracle, supplied, cfg.scoring.category_specificity)
        row_of = {(r["dataset"], r["user_id"]): r for r in rs}
        for s in scores:
            r = row_of[s["key"]]
            out += [Outcome(str(r["sample_id"]), setting_label(group_keys, r), f"{r['dataset']}/{r['user_id']}",
                            metric, float(s[field]), "median") for metric, field in PAIRED.items()]
    return out


def aggregate(cfg: GistbenchConfig, rows: list[dict]) -> dict[str, float]:
    """Metrics of one run; with several chunk sizes (UIH ablation), prefixed ``uih<n>/`` per size."""
    by_size: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_size[r.get("chunk_size")].append(r)
    if len(by_size) <= 1:
        return _metrics_of(cfg, rows)[0]
    out: dict[str, float] = {}
    for size, rs in sorted(by_size.items()):
        out.update({f"uih{size}/{k}": v for k, v in _metrics_of(cfg, rs)[0].items()})
    return out


def predictions(rows: list[dict]) -> list[dict]:
    """The run as ``llmrec score gistbench`` lines (final categories; one model label per chunk size)."""
    lines = lines_from_rows([r if rec is None else {**r, "interests_scored": rec}
                             for r, rec in zip(rows, resolve_categories(rows))])
    if len({line.get("chunk_size") for line in lines if line.get("chunk_size") is not None}) > 1:
        for line in lines:
            line["model"] = f"{line['model']}@uih{line['chunk_size']}"
    return lines


def plots(cfg: GistbenchConfig, rows: list[dict], out_dir: Path) -> list[Path]:
    """Per-user IG_P vs IG_R, and the failure-mode shares among unverified interests."""
    from matplotlib.figure import Figure

    from llmrec.pipelines.common.plotting import finite, left_out

    path = out_dir / "gistbench_scores.png"
    if not _ok(rows):
        left_out(out_dir, path.name, "no user with a parsed answer")
        return []
    metrics, scores = _metrics_of(cfg, rows)
    points = [(s["ig_r"], s["ig_p"]) for s in scores if finite(s["ig_r"]) and finite(s["ig_p"])]
    modes = list(scoring.FAILURE_MODES)
    shares = {m: metrics.get(f"fail_{m}") for m in modes}
    panels = (["per user"] if points else []) + (["failure modes"] if any(map(finite, shares.values())) else [])
    if not panels:
        left_out(out_dir, path.name, "no user with an IG score and no unverified interest")
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(4.5 * len(panels), 4))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        if panel == "per user":
            ax.scatter([x for x, _ in points], [y for _, y in points], s=12, alpha=0.6)
            ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
            ax.set(xlabel="IG recall", ylabel="IG precision", title=f"per user (n={len(points)})", xlim=(0, 1.05),
                   ylim=(0, 1.05))
        else:
            ax.bar(["ins. imp+", "ins. exp+", "exc. neg"], [100 * v if finite(v) else 0.0 for v in shares.values()])
            ax.set(ylabel="% of unverified interests", title="IG failure modes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return [path]
