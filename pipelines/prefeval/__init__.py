"""PrefEval (Zhao et al., "Do LLMs Recognize Your Preferences?", ICLR 2025): the MCQ task.

Samples: topic × form × pair × turns × method. Stages: the model's live reply to an
explicit preference, then the MCQ answer. Scoring: the reference's <choice> parsing.
"""

from __future__ import annotations

import json
from pathlib import Path

from llmrec.errors import DataError
from pipelines.benchmark import DataFile, DataManifest, LLMStage, ScoreTask
from pipelines.prefeval import data as pdata
from pipelines.prefeval import metrics, prompts
from pipelines.prefeval.config import PrefEvalConfig
from serving.types import Constraint, Message, Request, Result, SamplingParams

HERE = Path(__file__).parent


def _manifest() -> DataManifest:
    m = json.loads((HERE / "manifest.json").read_text())
    base = f"https://raw.githubusercontent.com/{m['repository']}/{m['commit']}"
    files = tuple(DataFile(f"prefeval/{f['path']}", f"{base}/{f['path']}", f["sha256"]) for f in m["files"])
    return DataManifest("prefeval", f"github.com/{m['repository']}@{m['commit'][:12]}", files,
                        probe="prefeval/benchmark_dataset/filtered_inter_turns.json")


class PrefEval:
    name = "prefeval"
    config_cls = PrefEvalConfig
    group_keys = ("form", "turns", "method")
    data = _manifest()
    score_tasks = (
        ScoreTask("prefeval-mcq", ("sample_id", "gold", "output"), metrics.score_predictions,
                  "PrefEval classification: accuracy and missed_rate from raw outputs"),
    )

    def build_samples(self, cfg: PrefEvalConfig, data_dir: Path) -> list[dict]:
        out = []
        inter = {n: pdata.inter_turns(data_dir, n) for n in cfg.turns}
        for topic in cfg.topics:
            mcq = pdata.load_topic(data_dir, "mcq", topic)
            for form in cfg.forms:
                recs = pdata.load_topic(data_dir, form, topic)
                if len(recs) != len(mcq):
                    raise DataError(f"prefeval {topic}: {form} has {len(recs)} records, mcq_options {len(mcq)}")
                for task_id in range(min(len(recs), cfg.per_topic or len(recs))):
                    options, gold = prompts.shuffle_options(mcq[task_id]["classification_task_options"],
                                                            cfg.seed, topic, task_id)
                    for n in cfg.turns:
                        for method in cfg.methods:
                            out.append({
                                "sample_id": f"{topic}/{form}/{task_id:04d}/t{n:03d}/{method}",
                                "topic": topic, "form": form, "task_id": task_id, "turns": n, "method": method,
                                "question": recs[task_id]["question"], "preference": recs[task_id]["preference"],
                                "options": options, "gold": gold,
                                "prefix_key": f"{topic}/{form}/{task_id:04d}", "prefix_len": n,
                                "_preference": prompts.preference_messages(form, recs[task_id]),
                                "_inter": inter[n],
                            })
        return out[: cfg.limit] if cfg.limit else out

    def stages(self, cfg: PrefEvalConfig) -> list[LLMStage]:
        def render_reply(s: dict) -> Request | None:
            if s["form"] != "explicit":
                return None
            msgs = prompts.system(cfg) + [Message(**m) for m in s["_preference"]]
            return Request(messages=msgs, sampling=SamplingParams(max_tokens=cfg.pref_reply_max_tokens),
                           prefix_key=s["prefix_key"])

        def render_answer(s: dict) -> Request:
            constraint = Constraint(choices=[f"<choice>{c}</choice>" for c in prompts.LETTERS]) \
                if cfg.constrain_choice else None
            return Request(messages=prompts.conversation(cfg, s, s.get("pref_reply")),
                           sampling=SamplingParams(max_tokens=cfg.answer_max_tokens), constraint=constraint,
                           prefix_key=s["prefix_key"])

        return [
            LLMStage("pref_reply", render_reply, lambda s, r: {"pref_reply": r.text}),
            LLMStage("answer", render_answer, _accept_answer),
        ]

    def score(self, cfg: PrefEvalConfig, sample: dict) -> dict:
        return metrics.score_answer(sample.get("output"), sample["gold"])

    def aggregate(self, cfg: PrefEvalConfig, rows: list[dict]) -> dict[str, float]:
        return metrics.mcq_metrics(rows)

    def predictions(self, rows: list[dict]) -> list[dict]:
        """Lines for `llmrec score prefeval-mcq` (answered samples)."""
        keep = ("sample_id", "gold", "output", "topic", "form", "turns", "method", "prompt_tokens")
        return [{k: r.get(k) for k in keep} for r in rows if r.get("status") == "ok"]

    def plots(self, cfg: PrefEvalConfig, rows: list[dict], out_dir: Path) -> list[Path]:
        from pipelines.prefeval.plots import accuracy_by_turns

        return [accuracy_by_turns(rows, out_dir / "accuracy_by_turns.png")]


def _accept_answer(sample: dict, result: Result) -> dict:
    return {"output": result.text, "prompt_tokens": result.prompt_tokens}


BENCHMARK = PrefEval()
