"""GISTBench (Meta, 2026): LLM user understanding as Interest Groundedness and Interest Specificity.

One sample per user (and chunk size). Stages: closed-loop interest extraction over history
chunks (subject engine) → judge filter of each interest's cited objects (IG) → overlap
filter and retrieval test per interest (IS) → taxonomy mapping. Per-sample scoring checks
the verification predicate; the run's aggregation maps categories, builds the oracle and
reports IG_P, IG_R, IG_F1, IS and HM (mean and median, bootstrap CIs). See README.md.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.common import reask
from llmrec.pipelines.capabilities import (HasTransient, HasData, HasAssets, Aggregates, HasScoreTasks, Presents, Judged, Explains, PairedOutcomes)
from llmrec.pipelines.protocol import (UNREADABLE, Benchmark, DataFile, DataManifest, Explanation, JudgeDecision,
                                       LoopStage, Outcome, ScoreTask, failed_explanation)
from llmrec.pipelines.benchmarks.gistbench import aggregate as agg
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.benchmarks.gistbench.predictions import ContractLine, score_predictions
from llmrec.pipelines.benchmarks.gistbench.samples import assets, build_samples
from llmrec.pipelines.benchmarks.gistbench.stages import build_stages, score_sample
from llmrec.pipelines.benchmarks.gistbench.payload import TRANSIENT, GistbenchPayload

_REPO, _COMMIT = "facebookresearch/GISTBench", "0d7e033a09ebc298bb1d3e16e9a50eb513701af2"
_FILES = {
    "categories.csv": "6067fd464d39305ba443b2a2c6aa611158e267e75d1bec61ee20a1a50a834962",
    "mock_dataset.json": "64661eb8d184b1c1baccd6fc0c3bc8001fd7a57c5400a30cc2f4af8f9569db70",
    "mock_oracle.json": "86765b40c7e5ebd2cca5e4e6c815063bf3ad249097f374b944e7be674e427ecc",
    "oracle_synthetic.json": "dd4ed69fec183f72698fbe3b66f90601d7cd373dced53a85dd111df803a92c6f",
}


def _manifest() -> DataManifest:
    base = f"https://raw.githubusercontent.com/{_REPO}/{_COMMIT}"
    files = tuple(DataFile(f"gistbench/gistbench/assets/{name}", f"{base}/gistbench/assets/{name}", sha)
                  for name, sha in _FILES.items())
    return DataManifest("gistbench", f"github.com/{_REPO}@{_COMMIT[:12]}", files,
                        probe="gistbench/gistbench/assets/categories.csv")


class GistBench(Benchmark, HasTransient, HasData, HasAssets, Aggregates, HasScoreTasks, Presents, Judged, Explains,
                PairedOutcomes):
    name = "gistbench"
    config_cls = GistbenchConfig
    payload = GistbenchPayload
    transient = TRANSIENT
    group_keys = ("chunk_size",)
    protocol_keys = ("dataset", "users", "thresholds", "extraction", "judge", "specificity", "taxonomy")
    headline_metrics = ("ig_f1_median", "is_median", "hm_median", "failed")
    judge_stages = ("judge", "specificity")  # the IG evidence judge and the IS probes (the taxonomy mapper is not)
    judged_metrics = ("ig_f1_median", "is_median", "hm_median")  # shown with judge_failure_rate beside them
    data = _manifest()
    score_tasks = (
        ScoreTask("gistbench", ContractLine, score_predictions,
                  "GISTBench: IG_P/IG_R/IG_F1/IS/HM (mean, median) of one model; union oracle unless --oracle",
                  options=("model", "oracle")),
    )

    def build_samples(self, cfg: GistbenchConfig, data_dir: Path) -> list[dict]:
        return build_samples(cfg, data_dir)

    def assets(self, cfg: GistbenchConfig, data_dir: Path) -> dict:
        return assets(cfg, data_dir)

    def stages(self, cfg: GistbenchConfig) -> list[LoopStage]:
        return build_stages(cfg)

    def score(self, cfg: GistbenchConfig, sample: dict) -> dict:
        return score_sample(cfg, sample)

    def aggregate(self, cfg: GistbenchConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        return agg.aggregate(cfg, rows)

    def plots(self, cfg: GistbenchConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
        return agg.plots(cfg, rows, out_dir)

    def drilldown(self, row: dict, assets: dict | None) -> dict:
        """The user's engagements as extraction input; answer, gold and verdict as ``explain`` words them."""
        prompt = (f"{row.get('n_engagements')} engagements ({', '.join(row.get('signals') or [])}) of user "
                  f"{row.get('user_id')} in {row.get('dataset')}, chunks of {row.get('chunk_size')}")
        return {"prompt": prompt, **self.explain(row).cells()}

    def explain(self, row: dict) -> Explanation:
        """The interests extracted (else the raw answer); no per-user gold (the oracle is the run's union) and so
        no right / wrong: the reason says how many interests the judge verified; missed when no interest could be
        read from any chunk."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        interests = [str(i.get("interest")) for i in row.get("interests") or [] if isinstance(i, dict)]
        raw = super().drilldown(row, None)["answer"]
        answer = "; ".join(interests) if interests else (raw if raw is None or isinstance(raw, str) else str(raw))
        n, v = row.get("n_interests"), row.get("n_verified")
        numbers = {k: row.get(k) for k in ("n_interests", "n_verified", "failed_chunks") if row.get(k) is not None}
        if n == 0 and row.get("interests") is not None:
            return Explanation(answer=answer, verdict="missed", reason="no interest could be read from the answers",
                               numbers=numbers)
        reason = f"{v} of {n} interests verified by the judge" if v is not None else None
        return Explanation(answer=answer, reason=reason, numbers=numbers)

    def predictions(self, rows: list[dict], assets: dict | None) -> list[dict]:
        return agg.predictions(rows)

    def judge_decisions(self, cfg: GistbenchConfig, row: dict) -> list[JudgeDecision]:
        """``evidence``: per interest and object it cites, whether the IG judge kept it as evidence;
        ``specificity``: per interest and probe object, whether the IS judge selected it. A question the judge
        never answered readably (given up after its re-asks) labels its objects ``unreadable``."""
        out = []
        cited = {i.get("interest"): i.get("item_ids") or [] for i in row.get("interests") or [] if isinstance(i, dict)}
        for name, st in (row.get("judge") or {}).items():
            if st.get("answer") is not None:
                kept = set(st["answer"])
                out += [JudgeDecision("evidence", f"{name}|{c}", c in kept) for c in cited.get(name, [])]
            elif st.get("state") == reask.MISSED:  # given up: unreadable, not "nothing kept"
                out += [JudgeDecision("evidence", f"{name}|{c}", UNREADABLE) for c in cited.get(name, [])]
        for name, st in (row.get("specificity") or {}).items():
            if st.get("answer") is not None:
                chosen = set(st["answer"])
                out += [JudgeDecision("specificity", f"{name}|{c}", c in chosen) for c in st.get("test_ids") or []]
            elif st.get("state") == reask.MISSED:
                out += [JudgeDecision("specificity", f"{name}|{c}", UNREADABLE) for c in st.get("test_ids") or []]
        return out

    def judge_failures(self, cfg: GistbenchConfig, row: dict) -> tuple[int, int]:
        """(judge questions given up, judge questions asked) of an answered user (``aggregate.judge_failures``)."""
        return agg.judge_failures(row)

    def paired_outcomes(self, cfg: GistbenchConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
        """Per-user IG_F1 / IS / HM (the headline metrics are their medians); cluster: the user."""
        return agg.paired_outcomes(cfg, rows, self.group_keys)


BENCHMARK = GistBench()
