"""PrefEval (Zhao et al., "Do LLMs Recognize Your Preferences?", ICLR 2025).

Tasks: ``mcq`` (classification, scored by the reference's <choice> parsing) and ``gen``
(generation, scored by an LLM judge's four checks and the reference's error types).
Methods: zero-shot, reminder, self-critic, few-shot CoT, RAG. Samples: topic × form × pair ×
turns × preference position × extra preferences × conflict × method (see samples.py);
stages in stages.py; README.md documents every difference from the reference code.
"""

from __future__ import annotations

import json
from pathlib import Path

from llmrec.pipelines.capabilities import (HasTransient, HasData, HasCli, HasAssets, Aggregates, HasScoreTasks, Presents, Judged, Explains, PairedOutcomes)
from llmrec.pipelines.protocol import (Benchmark, DataFile, DataManifest, Explanation, JudgeDecision, Outcome,
                                       ScoreTask, choice_verdict, failed_explanation, outcomes_from_fields)
from llmrec.pipelines.benchmarks.prefeval import gen_metrics, metrics
from llmrec.pipelines.benchmarks.prefeval.config import PrefEvalConfig
from llmrec.pipelines.benchmarks.prefeval.judge import CHECKS, check_outcomes, derive
from llmrec.pipelines.benchmarks.prefeval.payload import TRANSIENT, PrefEvalPayload

HERE = Path(__file__).parent


def _manifest() -> DataManifest:
    m = json.loads((HERE / "manifest.json").read_text())
    base = f"https://raw.githubusercontent.com/{m['repository']}/{m['commit']}"
    files = tuple(DataFile(f"prefeval/{f['path']}", f"{base}/{f['path']}", f["sha256"]) for f in m["files"])
    return DataManifest("prefeval", f"github.com/{m['repository']}@{m['commit'][:12]}", files,
                        probe="prefeval/benchmark_dataset/filtered_inter_turns.json")


class PrefEval(Benchmark, HasTransient, HasData, HasCli, HasAssets, Aggregates, HasScoreTasks, Presents, Judged,
               Explains, PairedOutcomes):
    name = "prefeval"
    config_cls = PrefEvalConfig
    payload = PrefEvalPayload
    transient = TRANSIENT
    group_keys = ("task", "form", "turns", "method", "position", "extra_prefs", "conflict")
    protocol_keys = ("task", "topics", "forms", "turns", "methods", "seed", "judge_mode", "truncation",
                     "constrain_choice", "answer_max_tokens", "pref_reply_max_tokens", "gen_max_tokens",
                     "templates", "system_prompt")
    headline_metrics = ("accuracy", "missed_rate", "failed", "over_context")
    judge_stages = tuple(f"judge_{c}" for c in CHECKS)
    judged_metrics = ("accuracy",)  # generation: shown with judge_failure_rate beside it
    # a jury's tie under `tie: strict`: the answer that counts against the subject
    adverse_labels = {"acknowledge": False, "violate": True, "hallucinate": True, "helpful": False}
    data = _manifest()
    score_tasks = (
        ScoreTask("prefeval-mcq", metrics.McqLine, metrics.score_predictions,
                  "PrefEval classification: accuracy and missed_rate from raw outputs", streams=True),
        ScoreTask("prefeval-gen", gen_metrics.GenLine, gen_metrics.score_predictions,
                  "PrefEval generation: accuracy, error-type rates and judge_failed from raw judge outputs",
                  streams=True),
    )

    @property
    def cli(self):
        from llmrec.pipelines.benchmarks.prefeval.cli import app

        return app

    def build_samples(self, cfg: PrefEvalConfig, data_dir: Path) -> list[dict]:
        from llmrec.pipelines.benchmarks.prefeval.samples import build_samples

        return build_samples(cfg, data_dir)

    def assets(self, cfg: PrefEvalConfig, data_dir: Path) -> dict:
        from llmrec.pipelines.benchmarks.prefeval.data import assets

        return assets(cfg, data_dir)

    def stages(self, cfg: PrefEvalConfig) -> list:
        from llmrec.pipelines.benchmarks.prefeval.stages import build_stages

        return build_stages(cfg)

    def score(self, cfg: PrefEvalConfig, sample: dict) -> dict:
        if cfg.task == "mcq":
            return metrics.score_answer(sample.get("output"), sample["gold"])
        if not cfg.evaluate:
            return {}
        return derive({c: sample.get(f"judge_{c}") for c in CHECKS}, cfg.judge_mode)

    def aggregate(self, cfg: PrefEvalConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        if cfg.task == "mcq":
            return metrics.mcq_metrics(rows)
        return gen_metrics.gen_metrics(rows, cfg.judge_mode)

    def cluster(self, row: dict) -> str:
        """The preference (topic + pair index; its forms are index-aligned), so a preference's settings are
        resampled together when settings are pooled."""
        return f"{row['topic']}/{int(row['task_id']):04d}"

    def paired_outcomes(self, cfg: PrefEvalConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
        """Per-sample means: ``accuracy`` ← ``correct`` (MCQ: answered samples; generation: the scored
        ones, i.e. judged, and in strict mode not ``judge_failed``), ``missed_rate`` ← ``missed`` (MCQ)."""
        if cfg.task == "mcq":
            fields = {"accuracy": "correct", "missed_rate": "missed"}
        else:
            fields = {"accuracy": "correct"}
            rows = [r for r in rows if "judge_failed" in r and not (cfg.judge_mode == "strict" and r["judge_failed"])]
        return outcomes_from_fields(self, rows, fields)

    def judge_decisions(self, cfg: PrefEvalConfig, row: dict) -> list[JudgeDecision]:
        """Generation: the judge's four yes/no checks of the sample, each a clear yes / no or ``unreadable``
        (``judge.check_outcomes``: never the reference's default for text it cannot read; hallucinate only when
        the preference was acknowledged). MCQ: none."""
        if row.get("task", cfg.task) != "gen" or not any(row.get(f"judge_{c}") is not None for c in CHECKS):
            return []
        return [JudgeDecision(c, "", v) for c, v in check_outcomes({c: row.get(f"judge_{c}") for c in CHECKS}).items()]

    def judge_failures(self, cfg: PrefEvalConfig, row: dict) -> tuple[int, int]:
        """Generation: (1, 1) for an answered sample whose judge answers could not be read (``judge_failed``),
        (0, 1) for another judged one; (0, 0) when not judged."""
        if row.get("status", "ok") != "ok" or row.get("judge_failed") is None:
            return 0, 0
        return int(bool(row["judge_failed"])), 1

    def jury_fields(self, cfg: PrefEvalConfig, sample: dict, jurors: dict[str, dict],
                    verdicts: dict[tuple[str, str], object]) -> dict:
        """Each check's raw answer from the first juror whose answer is the jury's verdict (so ``score`` derives
        the verdict from it); a verdict no juror gave (a tie broken by ``tie: strict``) as a plain tag."""
        out = {}
        for c in CHECKS:
            want = verdicts.get((c, ""))
            if want is None:
                continue
            text = next((f[f"judge_{c}"] for f in jurors.values()
                         if check_outcomes({k: f.get(f"judge_{k}") for k in CHECKS}).get(c) == want), None)
            out[f"judge_{c}"] = text if text is not None else f"<answer>{'Yes' if want else 'No'}</answer>"
        return out

    def predictions(self, rows: list[dict], assets: dict | None) -> list[dict]:
        """Lines for `llmrec score prefeval-mcq` / `prefeval-gen` (answered samples)."""
        groups = ("topic", "form", "turns", "method", "position", "extra_prefs", "conflict", "prompt_tokens")
        out = []
        for r in rows:
            if r.get("status") != "ok":
                continue
            if r.get("task", "mcq") == "mcq":
                keep = ("sample_id", "gold", "output") + groups
                out.append({k: r.get(k) for k in keep})
            elif "judge_acknowledge" in r:
                line = {"sample_id": r["sample_id"], **{c: r.get(f"judge_{c}") for c in CHECKS}}
                out.append({**line, "response": r.get("output"), **{k: r.get(k) for k in groups}})
        return out

    def drilldown(self, row: dict, assets: dict | None) -> dict:
        """The preference, how many inter-turn exchanges follow it, the question and its lettered options (the
        full conversation: ``llmrec view``); answer, gold and verdict as ``explain`` words them."""
        options = "".join(f"\n{letter}. {text}" for letter, text in zip("ABCD", row.get("options") or []))
        prompt = (f"preference ({row.get('form')}): {row.get('preference')}\n[{row.get('turns')} inter-turn "
                  f"exchanges]\nquestion: {row.get('question')}{options}")
        return {"prompt": prompt, **self.explain(row).cells()}

    def explain(self, row: dict) -> Explanation:
        """MCQ: the letter chosen and the gold letter, each with its option's text; right / wrong / missed (no
        <choice> could be read). Generation: the judge's four answers as words (acknowledged the preference,
        violated it, …) and the reference's error types; right when ``correct``, wrong when not, missed when the
        judge's answers could not be read (strict mode)."""
        failed = failed_explanation(row)
        if failed is not None:
            return failed
        if row.get("task", "mcq") == "mcq":
            options = row.get("options") or []

            def lettered(letter):
                i = "ABCD".find(letter) if isinstance(letter, str) and len(letter) == 1 else -1
                return f"{letter}. {options[i]}" if 0 <= i < len(options) else letter

            verdict = choice_verdict(row.get("correct"), row.get("missed"))
            pred, gold = row.get("prediction"), row.get("gold")
            chose = f"chose {pred}, " if pred else ""
            reason = {"missed": "no <choice> letter could be read from the output",
                      "wrong": f"{chose}the preference-consistent option is {gold}",
                      "right": f"{chose}the preference-consistent option"}.get(verdict)
            return Explanation(answer=lettered(pred) if pred else row.get("output"), gold=lettered(gold),
                               verdict=verdict, reason=reason,
                               numbers={k: row.get(k) for k in ("correct", "missed") if row.get(k) is not None})
        answers = row.get("judge_answers") or {}
        words = {"acknowledge": "acknowledged the preference", "violate": "violated the preference",
                 "hallucinate": "hallucinated a preference", "helpful": "helpful"}
        said = [f"{words[c]}: {answers[c]}" for c in CHECKS if answers.get(c)]
        errors = [e.replace("_", " ") for e in ("unaware_violation", "hallucinated_violation",
                                                 "inconsistent_violation", "unhelpful") if row.get(e)]
        if row.get("judge_failed") and row.get("correct") is None:
            verdict = "missed"
        else:
            verdict = choice_verdict(row.get("correct"))
        reason = "; ".join(["judge: " + ", ".join(said)] if said else []) or None
        if errors:
            reason = f"{reason + '; ' if reason else ''}error: {', '.join(errors)}"
        if row.get("judge_failed"):
            reason = f"{reason + '; ' if reason else ''}a judge answer could not be read as yes/no"
        flags = ("correct", "acknowledged", "hallucinated", "violated", "unhelpful", "judge_failed")
        return Explanation(answer=row.get("output"), gold=f"respects: {row.get('preference')}"
                           if row.get("preference") else None, verdict=verdict, reason=reason,
                           numbers={k: row[k] for k in flags if row.get(k) is not None})

    def plots(self, cfg: PrefEvalConfig, rows: list[dict], out_dir: Path, assets: dict | None) -> list[Path]:
        from llmrec.pipelines.benchmarks.prefeval.plots import run_plots

        return run_plots(cfg.task, rows, out_dir)


BENCHMARK = PrefEval()
