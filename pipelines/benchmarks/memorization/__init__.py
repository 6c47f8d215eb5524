"""Memorization probe (Di Palma et al., "Do LLMs Memorize Recommendation Datasets?", SIGIR 2025; reference code
sisinflab/LLM-MemoryInspector): can the model recite a recommendation catalogue? Given a few real lines of the
catalogue file and an item ID, the model completes the title; the share it reproduces is its coverage of the
catalogue, overall and per item-popularity bucket. Also user lines, a user's next rating row, and a title's year or
genres (``probe``). Catalogues: ML-100K, ML-1M, Last.fm (catalogues.py); rows (samples.py), prompts (prompts.py),
matching (matching.py), metrics (metrics.py). See README.md for every difference from the reference.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.benchmarks.memorization import catalogues, matching, metrics, prompts, samples
from llmrec.pipelines.benchmarks.memorization.config import MemorizationConfig
from llmrec.pipelines.benchmarks.memorization.payload import TRANSIENT, MemorizationPayload
from llmrec.pipelines.capabilities import (HasTransient, Aggregates, Presents, Explains, PairedOutcomes,
                                          ProbesMemory)
from llmrec.pipelines.protocol import (Benchmark, Explanation, LLMStage, Outcome, choice_verdict, failed_explanation,
                                       outcomes_from_fields)
from llmrec.types import Request, Result, SamplingParams


PROBE_LABEL = {"user": "users", "interaction": "interactions", "year": "years", "genres": "genres"}


def render(cfg: MemorizationConfig, row: dict) -> Request:
    return Request(messages=prompts.messages(row),
                   sampling=SamplingParams(temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                                           stop=list(cfg.stop)),
                   prefix_key=f"memorization/{row['catalogue']}")


def accept(row: dict, result: Result) -> dict:
    return {"output": result.text, "prompt_tokens": result.prompt_tokens}


class Memorization(Benchmark, HasTransient, Aggregates, Presents, Explains, PairedOutcomes, ProbesMemory):
    name = "memorization"
    config_cls = MemorizationConfig
    payload = MemorizationPayload
    transient = TRANSIENT
    group_keys = ("catalogue",)
    cluster_key = "unit"
    protocol_keys = ("probe", "catalogue", "items", "seed", "shots", "history", "per_user", "fuzzy_threshold",
                     "answer_cut", "popularity_buckets", "temperature", "max_tokens", "stop")
    headline_metrics = ("coverage", "coverage_normalised", "failed")
    # no HasData: the shared MovieLens / Last.fm folders (`llmrec data fetch` does not fetch them)
    absent_text = "not probed"  # the leaderboard's cell for a subject with no probe run beside its others

    def entry_label(self, config: dict) -> str:
        """``memorization ml-100k`` (``memorization ml-1m users``): one leaderboard column per probed catalogue (and
        probe)."""
        fields = MemorizationConfig.model_fields
        catalogue = config.get("catalogue") or fields["catalogue"].default
        probe = config.get("probe") or fields["probe"].default
        return f"{self.name} {catalogue}" + ("" if probe == "item" else f" {PROBE_LABEL.get(probe, probe)}")

    def probed_catalogue(self, cfg: MemorizationConfig) -> str | None:
        """The catalogue an item probe asked titles of (``movielens-100k:ml-100k``); None for the other probes."""
        return catalogues.catalogue_id(cfg.catalogue) if cfg.probe == "item" else None

    def memorized_items(self, rows: list[dict]) -> dict[tuple[str, str], bool]:
        """Each answered item row's item, by ID and by title → memorized (the reference's fuzzy match)."""
        out = {}
        for r in rows:
            if r.get("probe") == "item" and r.get("status", "ok") == "ok" and r.get("correct") is not None:
                out[("id", str(r["key"]))] = out[("title", str(r["gold"]))] = bool(r["correct"])
        return out

    def build_samples(self, cfg: MemorizationConfig, data_dir: Path) -> list[dict]:
        rows = samples.build(cfg, catalogues.load(cfg.catalogue, samples.folder(cfg, data_dir)))
        return rows[: cfg.limit] if cfg.limit else rows

    def stages(self, cfg: MemorizationConfig) -> list:
        return [LLMStage("recite", lambda row: render(cfg, row), accept,
                         reads=("probe", "dataset", "sep", "key", "catalogue"), writes=("output", "prompt_tokens"))]

    def score(self, cfg: MemorizationConfig, row: dict) -> dict:
        if row.get("probe") in ("year", "genres"):
            return matching.match_attribute(row.get("output"), row["key"], row["sep"], row["gold"], row["probe"],
                                            cfg.answer_cut)
        return matching.match(row.get("output"), row["key"], row["sep"], row["gold"], cfg.fuzzy_threshold,
                              cfg.answer_cut, row.get("probe") or "item")

    def aggregate(self, cfg: MemorizationConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        return metrics.aggregate_rows(rows)

    def paired_outcomes(self, cfg: MemorizationConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
        """coverage ← correct, coverage_exact ← exact, coverage_normalised ← normalised (one unit per item)."""
        return outcomes_from_fields(self, rows, metrics.MATCHES)

    def explain(self, row: dict) -> Explanation:
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        sim = row.get("similarity")
        how = ("exactly" if row.get("exact") else "after normalising" if row.get("normalised") else
               f"by similarity {sim}" if row.get("correct") else None)
        what = {"user": "user line", "interaction": "next row", "year": "year", "genres": "genre set"}.get(
            row.get("probe"), "title")
        reason = f"the {what} was reproduced {how}" if how else f"not reproduced (similarity {sim})"
        return Explanation(answer=row.get("answer"), gold=row.get("gold"), verdict=choice_verdict(row.get("correct")),
                           reason=reason, numbers={k: row.get(k) for k in ("similarity", "exact", "normalised",
                                                                           "popularity", "pop_bucket")
                                                   if row.get(k) is not None})

    def drilldown(self, row: dict, assets: dict | None) -> dict:
        sep = row.get("sep", "")
        shots = "\n".join(f"{i}{sep}…" for i in row.get("shot_ids") or [])  # the shot lines are not stored
        return {"prompt": f"{row.get('catalogue')}: {shots}\n{row.get('key')}{sep}", **self.explain(row).cells()}

    def plots(self, cfg: MemorizationConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
        from llmrec.pipelines.benchmarks.memorization.plots import bucket_bars

        path = bucket_bars({"this run": self.aggregate(cfg, rows, assets)}, Path(out_dir) / "memorization_pop.png")
        return [path] if path else []


BENCHMARK = Memorization()
