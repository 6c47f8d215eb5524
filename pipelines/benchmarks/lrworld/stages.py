"""One stage: ask the question, keep the raw answer. Temperature 0; the answer is constrained
to the option labels when ``sampling.constrained`` (engines that honour
``Constraint(choices=...)``; CoT rows are never constrained) and parsed by regex otherwise."""

from __future__ import annotations

from llmrec.pipelines.benchmarks.lrworld import prompts
from llmrec.pipelines.benchmarks.lrworld.config import LRWorldConfig
from llmrec.pipelines.benchmarks.lrworld.samples import labels
from llmrec.pipelines.protocol import LLMStage, sample_assets
from llmrec.types import Constraint, Request, Result, SamplingParams


def render(cfg: LRWorldConfig, row: dict) -> Request:
    cot = row.get("variant") == "cot"
    s = cfg.sampling
    constraint = Constraint(choices=labels(row["kind"])) if s.constrained and not cot else None
    return Request(messages=prompts.messages(sample_assets(row)["templates"], row), constraint=constraint,
                   sampling=SamplingParams(temperature=s.temperature, max_tokens=s.cot_max_tokens if cot else
                                           s.max_tokens),
                   prefix_key=f"lrworld/{row['factor']}/{row['variant']}")


def accept(row: dict, result: Result) -> dict:
    return {"output": result.text, "prompt_tokens": result.prompt_tokens}


def build_stages(cfg: LRWorldConfig) -> list[LLMStage]:
    return [LLMStage("answer", lambda row: render(cfg, row), accept,
                     reads=("factor", "kind", "options", "variant"), writes=("output", "prompt_tokens"))]
