"""PerRecBench (Tan et al., "Can Large Language Models Understand Preferences in Personalized
Recommendation?", arXiv 2501.13391): rank the users of a group by how much each prefers a
shared query item, relative to their own average rating.

The benchmark is *built* from timestamped rating data (groups.py, paper §2.1), prompted
with BM25-retrieved history and LLM profiles (retrieval.py, profiles.py, prompts.py), run
pointwise / pairwise (heapsort) / listwise (stages.py, ranking.py), parsed and scored as
the reference does (parsing.py, metrics.py). See README.md.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.capabilities import (HasTransient, HasCli, Aggregates, HasScoreTasks, Presents, HasBaselines, Explains, PairedOutcomes)
from llmrec.pipelines.protocol import (Benchmark, Explanation, ScoreTask, choice_verdict, failed_explanation,
                                       prediction_lines)
from llmrec.pipelines.benchmarks.perrecbench import metrics, samples
from llmrec.pipelines.benchmarks.perrecbench.config import PerRecBenchConfig
from llmrec.pipelines.benchmarks.perrecbench.profiles import profile_stage
from llmrec.pipelines.benchmarks.perrecbench.stages import build_stages, finalize, pair_ties
from llmrec.pipelines.benchmarks.perrecbench.payload import TRANSIENT, PerRecBenchPayload


class PerRecBench(Benchmark, HasTransient, HasCli, Aggregates, HasScoreTasks, Presents, HasBaselines, Explains,
                  PairedOutcomes):
    name = "perrecbench"
    config_cls = PerRecBenchConfig
    payload = PerRecBenchPayload
    transient = TRANSIENT
    group_keys = ("level", "mode")
    protocol_keys = ("data", "levels", "modes", "groups", "prompt", "sampling", "ties")
    headline_metrics = ("ptc", "ptc_rank", "exact_match", "failed")
    # llmrec compare's unit: the query item, whose users recur across levels and modes (a sample holds several
    # users, so clustering by user would not partition the samples); ptc / ptc_rank / exact_match pair per group
    cluster_key = "item_id"
    # no HasData: built from rating data read by pipelines/interactions (cfg.data)
    score_tasks = (
        ScoreTask("perrecbench", metrics.ContractLine, metrics.score_predictions,
                  "PerRecBench: ptc (the reference's ordering-list Kendall tau), ptc_rank, exact_match, missed, "
                  "per mode, n_tied / tied_share (predictions that leave users unordered), and pooled MAE/RMSE of "
                  "point lines carrying ratings", streams=True, options=("ties",),
                  option_schema=metrics.ScoreOptions),
    )

    @property
    def cli(self):
        from llmrec.pipelines.benchmarks.perrecbench.cli import app

        return app

    def build_samples(self, cfg: PerRecBenchConfig, data_dir: Path) -> list[dict]:
        interactions, items = samples.load_frames(cfg, data_dir)
        return samples.build_from_frames(cfg, interactions, items, data_dir)

    def stages(self, cfg: PerRecBenchConfig) -> list:
        profile = profile_stage(cfg)
        return ([profile] if profile is not None else []) + build_stages(cfg)

    def score(self, cfg: PerRecBenchConfig, sample: dict) -> dict:
        prediction = sample.get("prediction")
        if prediction is None and sample.get("answers"):
            prediction = finalize(sample)
        tied_pairs = sample.get("tied_pairs")
        if sample.get("mode") == "pair" and sample.get("answers"):
            tied_pairs = pair_ties(sample)
        line = dict(sample, prediction=prediction, tied_pairs=tied_pairs)
        s = metrics.score_line(line, getattr(cfg, "ties", "reference"))  # cfg None: the reference
        return {"prediction": prediction, "ptc": s["ptc"], "ptc_rank": s["ptc_rank"],
                "exact_match": s["exact_match"], "missed": not s["usable"], "ties": s["ties"],
                "tied_pairs": tied_pairs}

    def aggregate(self, cfg: PerRecBenchConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        return metrics.aggregate_rows(rows, cfg.levels, cfg.ties)

    def predictions(self, rows: list[dict], assets: dict | None) -> list[dict]:
        """Lines of the ``llmrec score perrecbench`` contract (answered samples)."""
        return prediction_lines(metrics.ContractLine, [r for r in rows if r.get("status", "ok") == "ok"])

    def drilldown(self, row: dict, assets: dict | None) -> dict:
        """The group (users, query item, mode); answer, gold and verdict as ``explain`` words them (orderings of
        the users, the gold as ranks)."""
        prompt = (f"{row.get('mode')} ({row.get('level')}): rank users {row.get('user_ids')} by how much each "
                  f"prefers item {row.get('item_id')} relative to their own average rating")
        return {"prompt": prompt, **self.explain(row).cells()}

    def explain(self, row: dict) -> Explanation:
        """The gold as ranks (``1. user 764 (+0.50)``: each user's rating minus their average, most preferred
        first), the predicted ordering of the same users (point mode: with the predicted ratings), right when
        the ordering is exact, wrong when not (with PTC), missed when no ordering could be read."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        users = [str(u) for u in row.get("user_ids") or []]
        rel = row.get("relative_ratings") or []

        def name(i: int) -> str:
            return f"user {users[i - 1]}" if 1 <= i <= len(users) else f"user #{i}"

        gold = None
        if rel and len(rel) == len(users):
            gold = ", ".join(f"{pos}. {name(i)} ({rel[i - 1]:+.2f})"
                             for pos, i in enumerate(metrics.ordering_from_values(rel), start=1))
        answer = None
        pred = row.get("prediction")
        if pred is not None:
            try:
                order = metrics.prediction_ordering(row.get("mode"), pred, row.get("avg_ratings") or [])
            except (TypeError, ValueError, IndexError):
                order = None
            if order is not None:
                answer = ", ".join(f"{pos}. {name(i)}" for pos, i in enumerate(order, start=1))
                if row.get("mode") == "point":
                    answer += " (predicted ratings " + ", ".join(str(p) for p in pred) + ")"
        if answer is None:
            answer = self._raw_answer(row)
        em = row.get("exact_match")
        verdict = choice_verdict(None if em is None else em >= 1.0, row.get("missed"))
        reason = {"missed": "no ordering of the users could be read from the answer",
                  "wrong": "the predicted ordering differs from the gold ranks",
                  "right": "the predicted ordering is the gold ranks"}.get(verdict)
        if reason and verdict != "missed" and row.get("ties"):
            reason += "; the prediction leaves some users tied (their order is the tie-break's, not the model's)"
        return Explanation(answer=answer, gold=gold, verdict=verdict, reason=reason,
                           numbers={k: row.get(k) for k in ("ptc", "ptc_rank", "exact_match", "missed", "ties")
                                    if row.get(k) is not None})

    def _raw_answer(self, row: dict) -> str | None:
        answer = super().drilldown(row, None)["answer"]
        return answer if answer is None or isinstance(answer, str) else str(answer)

    def baselines(self, cfg: PerRecBenchConfig, samples: list[dict], assets: dict | None) -> dict[str, list[dict]]:
        """The paper's naive baselines, one point line per group (``<group>/point``, the id of the
        LLM's point sample): ``user_avg`` predicts each user's average rating (every point score 0),
        ``item_avg`` the query item's average rating among the group's other raters."""
        groups = {s["group_id"]: s for s in samples}.values()
        out = {}
        for label, key in (("user_avg", "avg_ratings"), ("item_avg", "item_avg_ratings")):
            rows = []
            for g in groups:
                row = {k: v for k, v in g.items() if not k.startswith("_")}
                row.update(sample_id=f"{g['group_id']}/point", mode="point", status="ok", prediction=list(g[key]))
                if isinstance(row.get("setting"), dict):  # the copied sample's setting: this row's is point mode
                    row["setting"] = {**row["setting"], "mode": "point"}
                rows.append(dict(row, **self.score(cfg, row)))
            out[label] = rows
        return out

    def plots(self, cfg: PerRecBenchConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
        from llmrec.pipelines.benchmarks.perrecbench.report import results_table

        return results_table(metrics.aggregate_rows(rows, cfg.levels, cfg.ties), cfg.levels, out_dir)


BENCHMARK = PerRecBench()
