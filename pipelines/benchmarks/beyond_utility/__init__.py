"""Beyond Utility (Jiang et al., "Beyond Utility: Evaluating LLM as Recommender", WWW'25): rank 20
candidates for a user from their history, judged on utility, novelty, popularity bias, fairness,
diversity and hallucination, with the SAME metric code for LLM outputs and trained baselines.

Data (dataset.py) → users and candidates (users.py, samples.py) → prompts (prompts.py, the
reference's template files) → re-asked until a list parses (stages.py, parsing.py) → titles
mapped to ids → the 14 metrics of the score contract (metrics.py, contract.py). See README.md.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from llmrec.config import fingerprint
from llmrec.pipelines.benchmarks.beyond_utility import plots, results, samples
from llmrec.pipelines.benchmarks.beyond_utility.config import BeyondUtilityConfig
from llmrec.pipelines.benchmarks.beyond_utility.contract import ContractLine, ScoreOptions, score_task
from llmrec.pipelines.benchmarks.beyond_utility.dataset import load_dataset
from llmrec.pipelines.benchmarks.beyond_utility.metrics import METRIC_KEYS
from llmrec.pipelines.benchmarks.beyond_utility.stages import build_stages, rank_state, titles
from llmrec.pipelines.capabilities import (HasTransient, HasCli, HasAssets, Aggregates, HasScoreTasks, Presents,
                                          HasBaselines, Explains, PairedOutcomes, TargetsItems)
from llmrec.pipelines.protocol import (Benchmark, Explanation, Outcome, RankingBaselines, ScoreTask,
                                       failed_explanation)
from llmrec.pipelines.benchmarks.beyond_utility.payload import TRANSIENT, BeyondUtilityPayload

SCORE_TASK = ScoreTask(
    "beyond-utility", ContractLine, score_task,
    "Beyond Utility: hr, ndcg, aplt, arp, popreo, serendipity, self_information, gini, dpd, jain, item_coverage, "
    "shannon, jaccard, hallucination at --k, with --items ITEMS.jsonl (train_freq, categories, n_users)",
    options=("items", "k"), option_schema=ScoreOptions)


def _catalog_key(cfg: BeyondUtilityConfig, data_dir: Path) -> str:
    return fingerprint([cfg.model_dump(mode="json"), str(data_dir)], 16)


class BeyondUtility(Benchmark, HasTransient, HasCli, HasAssets, Aggregates, HasScoreTasks, Presents, HasBaselines,
                    Explains, PairedOutcomes, TargetsItems):
    name = "beyond_utility"
    config_cls = BeyondUtilityConfig
    payload = BeyondUtilityPayload
    transient = TRANSIENT
    group_keys = results.SETTING_KEYS
    score_tasks = (SCORE_TASK,)
    # no HasData: MovieLens / LastFM / Amazon through the interaction layer; templates from the data dir
    headline_metrics = ("hr", "ndcg", "serendipity", "item_coverage", "hallucination", "compliance")
    protocol_keys = ("data", "task", "num_negatives", "seed", "k", "list_len", "users", "prompts", "history_lens",
                     "orders", "paraphrase", "title_match", "padding", "query")
    metric_keys = METRIC_KEYS

    @property
    def cli(self):
        from llmrec.pipelines.benchmarks.beyond_utility.cli import app

        return app

    def build_samples(self, cfg: BeyondUtilityConfig, data_dir: Path) -> list[dict]:
        ds = load_dataset(cfg, data_dir)
        templates = cfg.templates_dir if cfg.templates_dir.is_absolute() else Path(data_dir) / cfg.templates_dir
        return samples.build(cfg, ds, templates, _catalog_key(cfg, data_dir))

    def assets(self, cfg: BeyondUtilityConfig, data_dir: Path) -> dict:
        """The catalog (dataset + title index) that maps answered titles to ids, read on the driver."""
        return results.catalog(cfg, load_dataset(cfg, data_dir), _catalog_key(cfg, data_dir))

    def stages(self, cfg: BeyondUtilityConfig) -> list:
        return build_stages(cfg)

    def score(self, cfg: BeyondUtilityConfig, sample: dict) -> dict:
        return {"compliant": titles(sample) is not None}

    def aggregate(self, cfg: BeyondUtilityConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        return results.aggregate(cfg, rows, assets)

    def paired_outcomes(self, cfg: BeyondUtilityConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
        """Per-user values of the per-user-mean metrics (``results.paired_outcomes``); cluster: the user."""
        return results.paired_outcomes(cfg, rows, assets)

    def predictions(self, rows: list[dict], assets: dict | None) -> list[dict]:
        """Every answered row as a contract line plus its setting (per-setting files: predictions/)."""
        out = []
        for r in rows:
            if r.get("catalog_key") and (rank_state(r) is not None or "ranked" in r):  # asked, or a baseline
                out.append(dict(results.contract_line(r, assets), setting=results.setting_of(r)))
        return out

    def ranking_baselines(self, cfg: BeyondUtilityConfig, samples: list[dict], assets: dict | None) -> RankingBaselines:
        """Trained recommenders (MostPop, BM25, BPRMF, ...) on the benchmark's own interactions and filters
        (leave-one-out holds out each user's target), ranking every sample's candidates in the order the LLM
        saw them; the same metric code scores them."""
        return RankingBaselines(cfg.data.model_dump(mode="json", exclude_none=True),
                                cfg.filters.model_dump(mode="json"), partial(results.ranked_rows, samples, assets))

    def drilldown(self, row: dict, assets: dict | None) -> dict:
        """The user's shown history and the candidates; answer, gold and verdict as ``explain`` words them (the
        titles ranked, for a trained baseline's row too; the held-out target's title)."""
        names = row.get("candidate_titles") or row.get("candidates")
        prompt = (f"user {row.get('user_id')}: {row.get('history_shown')} of {row.get('history_len')} history "
                  f"items shown ({row.get('template')} prompt); rank {len(row.get('candidates') or [])} "
                  f"{row.get('order')} candidates: {names}")
        return {"prompt": prompt, **self.explain(row).cells()}

    def target_item(self, cfg: BeyondUtilityConfig, row: dict) -> tuple[str, str, str] | None:
        """The held-out target, by its title (rows keep the contract's internal IDs, not the file's)."""
        if not row.get("target_title"):
            return None
        return cfg.data.catalogue(), "title", str(row["target_title"])

    def explain(self, row: dict) -> Explanation:
        """The ranked list as titles (a trained baseline's ids mapped to titles through the candidates it
        ranked), the held-out target's title as gold; right when the target is in the list (a hit), wrong when
        not, missed when the answer never parsed into a list (with the asks it took and the parse error)."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        cands, names = row.get("candidates") or [], row.get("candidate_titles") or []
        title_of = dict(zip(cands, names)) if len(names) == len(cands) else {}
        gold = row.get("target_title") or (title_of.get(row.get("target")) or
                                          (f"item {row['target']}" if row.get("target") is not None else None))
        state = rank_state(row)
        ranked = titles(row)
        numbers: dict = {}
        if ranked is None and row.get("ranked") is not None:  # a trained baseline's row: the ids it ranked
            ids = list(row["ranked"])
            ranked = [title_of.get(i, f"item {i}") for i in ids]
            hit = row.get("target") in ids
        elif ranked is not None:
            want = (gold or "").casefold().strip()
            hit = any(str(t).casefold().strip() == want for t in ranked) if want else None
        else:
            hit = None
        if state:
            numbers = {"attempts": state.get("attempts"), "compliant": ranked is not None}
        if ranked is None:
            why = state.get("parse_error") if state else None
            answer = super().drilldown(row, None)["answer"]
            return Explanation(answer=answer if answer is None or isinstance(answer, str) else str(answer),
                               gold=gold, verdict="missed" if state else None,
                               reason=f"the answer never parsed into a ranked list{f': {why}' if why else ''}"
                               if state else None, numbers=numbers)
        answer = "; ".join(f"{i}. {t}" for i, t in enumerate(ranked, start=1))
        if hit is None:
            return Explanation(answer=answer, gold=gold, numbers=numbers)
        pos = next((i for i, t in enumerate(ranked, start=1)
                    if str(t).casefold().strip() == (gold or "").casefold().strip()), None)
        numbers["hit"] = hit
        return Explanation(answer=answer, gold=gold, verdict="right" if hit else "wrong",
                           reason=f"the target is ranked {pos} of {len(ranked)}" if hit and pos
                           else "the target is in the list" if hit else "the target is not in the list",
                           numbers=numbers)

    def plots(self, cfg: BeyondUtilityConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
        return plots.make(cfg, rows, out_dir, assets)


BENCHMARK = BeyondUtility()
