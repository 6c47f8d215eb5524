"""LRWorld (the mental world of LLMs in recommendation: association, personalization and
knowledgeability probes; seed paper 001). The paper's samples and code are not public, so
llmrec builds the benchmark from public rating data (catalog.py, builders/), reproducibly
(seeded draws, a versioned sample file: samples.py), asks each question once per variant
and position run (prompts.py, stages.py), and scores accuracy / HitRate@1, missed rate,
position bias, noisy-profile drop and popularity of errors (parsing.py, metrics.py).
See README.md for the data format and every choice the paper leaves open.
"""

from __future__ import annotations

from pathlib import Path

from llmrec.pipelines.benchmarks.lrworld import metrics, samples
from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig
from llmrec.pipelines.benchmarks.lrworld.payload import TRANSIENT, LRWorldPayload
from llmrec.pipelines.benchmarks.lrworld.stages import build_stages
from llmrec.pipelines.capabilities import (HasTransient, HasCli, HasAssets, Aggregates, HasScoreTasks, Presents,
                                          Explains, PairedOutcomes, TargetsItems)
from llmrec.pipelines.protocol import (Benchmark, Explanation, Outcome, ScoreTask, choice_verdict,
                                       failed_explanation, outcomes_from_fields, prediction_lines)


class LRWorld(Benchmark, HasTransient, HasCli, HasAssets, Aggregates, HasScoreTasks, Presents, Explains,
              PairedOutcomes, TargetsItems):
    name = "lrworld"
    config_cls = LRWorldConfig
    payload = LRWorldPayload
    transient = TRANSIENT
    group_keys = ("variant",)
    protocol_keys = ("samples_file", "build", "measures", "per_measure", "variants", "position_runs", "shots",
                     "sampling", "seed")
    headline_metrics = ("base/accuracy", "base/missed_rate")
    # no HasData: built from rating data read by the interaction layer (cfg.build.sources)
    score_tasks = (
        ScoreTask("lrworld", metrics.ContractLine, metrics.score_predictions,
                  "LRWorld: accuracy / HitRate@1 with bootstrap CI and missed rate per variant, measure, factor "
                  "and scale; position bias (mean/var over runs, answer-position shares); noisy-profile drop; "
                  "popularity of errors", options=("confidence", "seed"), option_schema=metrics.ScoreOptions),
    )

    @property
    def cli(self):
        from llmrec.pipelines.benchmarks.lrworld.cli import app

        return app

    def build_samples(self, cfg: LRWorldConfig, data_dir: Path) -> list[dict]:
        built, _ = samples.load_samples(cfg, data_dir)
        rows = samples.expand(cfg, built)
        return rows[: cfg.limit] if cfg.limit else rows

    def assets(self, cfg: LRWorldConfig, data_dir: Path) -> dict:
        """Template texts, read on the driver (stages open no file)."""
        from llmrec.pipelines.benchmarks.lrworld.prompts import read_templates

        return {"templates": read_templates(cfg)}

    def stages(self, cfg: LRWorldConfig) -> list:
        return build_stages(cfg)

    def score(self, cfg: LRWorldConfig, sample: dict) -> dict:
        return metrics.score_line({**sample, "parsed": None})

    def aggregate(self, cfg: LRWorldConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        """Rows that failed in the engine (error, over context) count as missed answers."""
        lines = [r if r.get("status", "ok") == "ok" and "correct" in r else
                 {**r, "parsed": None, "correct": False, "missed": True, "pred_pos": None} for r in rows]
        out = metrics.aggregate_lines(lines)
        out["failed_rows"] = float(sum(r.get("status", "ok") != "ok" for r in rows))
        return out

    def cluster(self, row: dict) -> str:
        """The user where the probe has one (per source), else the built sample (its position runs and variants
        together)."""
        return f"{row.get('domain')}/user/{row['user_id']}" if row.get("user_id") else row["base_id"]

    def paired_outcomes(self, cfg: LRWorldConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
        """Per-sample means per variant: ``<variant>/accuracy`` ← ``correct``, ``<variant>/missed_rate`` ←
        ``missed`` (answered rows; ``llmrec compare`` drops failed ones)."""
        by_variant: dict[str, list[dict]] = {}
        for r in rows:
            by_variant.setdefault(r.get("variant") or "base", []).append(r)
        return [o for v, rs in by_variant.items()
                for o in outcomes_from_fields(self, rs, {f"{v}/accuracy": "correct", f"{v}/missed_rate": "missed"})]

    def target_item(self, cfg: LRWorldConfig, row: dict) -> tuple[str, str, str] | None:
        """The item a probe is about (the gold option's item: an association's consequent, a title asked from
        memory, the item whose attribute is asked), by its ID in the file; None for a user probe, or where the
        row's dataset is not among the config's built sources (a sample set built elsewhere)."""
        gold_id = (row.get("candidate_ids") or [None])[0]
        if gold_id is None or row.get("field") == "user":
            return None
        source = next((s for s in cfg.build.sources if s.name == row.get("dataset")), None)
        return None if source is None else (source.data.catalogue(), "id", str(gold_id))

    def predictions(self, rows: list[dict], assets: dict | None) -> list[dict]:
        """Lines of the ``llmrec score lrworld`` contract (every row; a failed one has output null)."""
        return prediction_lines(metrics.ContractLine, rows)

    def drilldown(self, row: dict, assets: dict | None) -> dict:
        """The probe (measure, variant, its target or history) and its numbered options; answer, gold and
        verdict as ``explain`` words them."""
        about = row.get("target") or row.get("history")
        labs = samples.labels(row.get("kind", "hit1"))
        options = "".join(f"\n{label}. {text}" for label, text in zip(labs, row.get("options") or []))
        prompt = f"{row.get('measure')} ({row.get('variant')}): {about}{options}"
        return {"prompt": prompt, **self.explain(row).cells()}

    def explain(self, row: dict) -> Explanation:
        """The option label read from the answer and the gold label, each with its option's text; right /
        wrong / missed (no valid label in the answer), with the gold's and the answer's positions."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        labs = list(samples.labels(row.get("kind", "hit1")))
        options = row.get("options") or []

        def labelled(label):
            i = labs.index(label) if label in labs else -1
            return f"{label}. {options[i]}" if 0 <= i < len(options) else label

        verdict = choice_verdict(row.get("correct"), row.get("missed"))
        parsed, gold = row.get("parsed"), row.get("gold")
        chose = f"chose {parsed}, " if parsed else ""
        reason = {"missed": "no valid option label could be read from the answer",
                  "wrong": f"{chose}the gold is {gold}", "right": "the answer is the gold option"}.get(verdict)
        return Explanation(answer=labelled(parsed) if parsed else row.get("output"), gold=labelled(gold),
                           verdict=verdict, reason=reason,
                           numbers={k: row.get(k) for k in ("correct", "missed", "pred_pos", "gold_pos")
                                    if row.get(k) is not None})

    def plots(self, cfg: LRWorldConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
        from llmrec.pipelines.benchmarks.lrworld.plots import all_plots

        return all_plots({"this run": self.aggregate(cfg, rows, assets)}, out_dir)


BENCHMARK = LRWorld()
