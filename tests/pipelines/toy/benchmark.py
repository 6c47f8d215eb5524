"""A toy benchmark that exists only to drive the real runner in tests (no data files).

Each sample asks the fake engine one question (an ``LLMStage`` with a truncation policy),
then asks ``rounds`` follow-ups one round at a time (a ``LoopStage``), and with ``judged`` asks
the judge engine about the answer (an ``LLMStage`` on ``engine="judge"``). Samples can be made
to misbehave on purpose: ``long`` (a prompt over the engine's context), ``bad_render``
(render raises), ``bad_score`` (score raises), ``no_text`` (a required key is missing).
Referenced in run configs as ``benchmark.name: "tests.pipelines.toy.benchmark:BENCHMARK"``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd
from pydantic import Field

from llmrec.pipelines.capabilities import Aggregates, HasBaselines, HasScoreTasks, PairedOutcomes, Presents
from llmrec.pipelines.common.jsonio import PredictionLine
from llmrec.pipelines.protocol import (Benchmark, BenchmarkConfig, LLMStage, LoopStage, Outcome, Payload, Ranker,
                                      RankingBaselines, Sample, ScoreTask, outcomes_from_fields, prediction_lines)
from llmrec.types import Constraint, Message, Request, Result, SamplingParams

NAME = "tests.pipelines.toy.benchmark:BENCHMARK"


class ToyConfig(BenchmarkConfig):
    n: int = Field(6, ge=1, description="samples")
    long: list[int] = Field(default_factory=list, description="sample indices whose prompt is over the context")
    bad_render: list[int] = Field(default_factory=list, description="indices whose render raises")
    bad_score: list[int] = Field(default_factory=list, description="indices whose score raises")
    no_text: list[int] = Field(default_factory=list, description="indices built without the 'text' key")
    truncate: bool = Field(False, description="shrink over-long prompts word by word until they fit")
    rounds: int = Field(2, ge=0, description="follow-up rounds of the loop stage")
    judged: bool = Field(False, description="a last stage asks the judge engine about each answer")
    ranking: str | None = Field(None, description="a CSV of interactions (user_id,item_id,timestamp): sample i is "
                                "its i-th user, whose candidates (the items it never touched before its last one) "
                                "trained recommenders rank (ranking_baselines); correct: the last item ranked first")
    choices: list[str] | None = Field(None, description="constrain the first question's answer to these")
    questions: str | None = Field(None, description="a text file in the data directory: its i-th line is sample "
                                  "i's question (instead of 'question i')")


def _ask(text: str, choices: list[str] | None = None) -> Request:
    return Request(messages=[Message(role="user", content=text)], sampling=SamplingParams(max_tokens=4),
                   constraint=Constraint(choices=choices) if choices else None)


def render(cfg: ToyConfig, s: Sample) -> Request:
    if s["index"] in cfg.bad_render:
        raise ValueError(f"cannot render sample {s['index']}")
    return _ask(s["text"], cfg.choices)


def shrink(s: Sample, req: Request, res: Result) -> Request | None:
    words = req.messages[-1].content.split()
    return _ask(" ".join(words[: max(1, len(words) // 2)])) if len(words) > 1 else None


def next_round(cfg: ToyConfig, s: Sample) -> list[Request]:
    done = len(s.get("follow_ups", []))
    return [_ask(f"follow-up {done} of {s['sample_id']}")] if done < cfg.rounds else []


def accept_round(s: Sample, reqs: list[Request], results: list[Result]) -> dict:
    return {"follow_ups": s.get("follow_ups", []) + [r.text for r in results]}


class ToyPayload(Payload):
    index: int
    kind: str
    text: str | None = None
    answer: str | None = None
    follow_ups: list[str] | None = None
    verdict: str | None = None
    correct: bool | None = None
    user_id: str | None = None  # with ``ranking``: the user, its target and candidates
    target: str | None = None
    candidates: list[str] | None = None


def ranking_users(cfg: ToyConfig) -> list[dict]:
    """Each user of ``cfg.ranking`` (sorted): its last item as target, candidates the items it never touched
    before it, in item order."""
    inter = pd.read_csv(cfg.ranking, dtype=str).sort_values(["user_id", "timestamp"], kind="stable")
    items = sorted(inter["item_id"].unique())
    out = []
    for user, g in inter.groupby("user_id", sort=True):
        seq = list(g["item_id"])
        out.append({"user_id": user, "target": seq[-1], "candidates": [i for i in items if i not in seq[:-1]]})
    return out


def ranked_rows(samples: list[Sample], rank: Ranker) -> list[Sample]:
    tops = rank([s["user_id"] for s in samples], [s["candidates"] for s in samples])
    return [dict(s, status="ok", answer=top[0], correct=top[0] == s["target"]) for s, top in zip(samples, tops)]


class ToyLine(PredictionLine):
    unique = ("sample_id",)
    sample_id: str
    answer: str | None


class Toy(Benchmark, Aggregates, HasScoreTasks, Presents, PairedOutcomes, HasBaselines):
    name = "toy"
    config_cls = ToyConfig
    payload = ToyPayload
    group_keys = ("kind",)
    protocol_keys = ("n", "truncate", "rounds")
    headline_metrics = ("accuracy", "failed")
    score_tasks = (ScoreTask("toy", ToyLine, lambda lines, opts: {"n": float(len(lines))}),)

    def build_samples(self, cfg: ToyConfig, data_dir: Path) -> list[Sample]:
        out = []
        users = ranking_users(cfg) if cfg.ranking else []
        asked = (Path(data_dir) / cfg.questions).read_text().splitlines() if cfg.questions else []
        for i in range(cfg.n):
            s = {"sample_id": f"toy-{i}", "index": i, "kind": "even" if i % 2 == 0 else "odd",
                 **(users[i] if i < len(users) else {})}
            if i not in cfg.no_text:
                s["text"] = ("word " * 200 if i in cfg.long else asked[i] if i < len(asked) else f"question {i}").strip()
            out.append(s)
        return out

    def stages(self, cfg: ToyConfig):
        ask = LLMStage("ask", lambda s: render(cfg, s), lambda s, r: {"answer": r.text},
                       shrink=shrink if cfg.truncate else None, reads=("text",), writes=("answer",))
        loop = LoopStage("follow", lambda s: next_round(cfg, s), accept_round, reads=("answer",),
                         writes=("follow_ups",))
        judge = LLMStage("judge", lambda s: _ask(f"judge the answer {s['answer']!r}"),
                         lambda s, r: {"verdict": r.text}, engine="judge", reads=("answer",), writes=("verdict",))
        return [ask, loop] + ([judge] if cfg.judged else [])

    def score(self, cfg: ToyConfig, s: Sample) -> dict:
        if s["index"] in cfg.bad_score:
            raise KeyError("no gold answer")
        return {"correct": s["answer"] == "yes"}

    def aggregate(self, cfg: ToyConfig, rows: list[dict], assets: dict | None) -> dict[str, float]:
        ok = [r for r in rows if r["status"] == "ok"]
        return {"n_samples": float(len(rows)), "failed": float(sum(r["status"] == "failed" for r in rows)),
                "over_context": float(sum(r["status"] == "over_context" for r in rows)),
                "accuracy": sum(r["correct"] for r in ok) / len(ok) if ok else float("nan")}

    def predictions(self, rows: list[dict], assets: dict | None) -> list[dict]:
        return prediction_lines(ToyLine, rows)

    def cluster(self, row: dict) -> str:
        """Consecutive index pairs (one even, one odd sample)."""
        return f"c{row['index'] // 2}"

    def paired_outcomes(self, cfg: ToyConfig, rows: list[dict], assets: dict | None) -> list[Outcome]:
        """accuracy ← correct."""
        return outcomes_from_fields(self, rows, {"accuracy": "correct"})

    def baselines(self, cfg: ToyConfig, samples: list[Sample], assets: dict | None) -> dict[str, list[Sample]]:
        """A model-free baseline (what a suite lists beside its subjects): answers "yes" to every even sample."""
        rows = [dict(s, status="ok", answer="yes" if s["index"] % 2 == 0 else "no") for s in samples]
        return {"even_yes": [dict(r, **self.score(cfg, r)) for r in rows]}

    def ranking_baselines(self, cfg: ToyConfig, samples: list[Sample], assets: dict | None) -> RankingBaselines | None:
        """With ``ranking``: trained recommenders rank each sample's candidates on that CSV's interactions."""
        if cfg.ranking is None:
            return None
        return RankingBaselines({"format": "csv", "path": cfg.ranking}, {}, partial(ranked_rows, samples))


BENCHMARK = Toy()
