"""Run a benchmark's stages over a batch of samples (plain Python; Ray calls it per batch).

Per stage, the requests of all still-healthy samples of the batch go to the engine
together (engines batch them), results are folded back with the stage's ``accept``.
A failed or over-context request marks its sample and skips its later stages.
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from pipelines.benchmark import Benchmark, BenchmarkConfig, LLMStage, LoopStage, Sample
from serving.resilience import generate_resilient
from serving.types import Request, Result

log = logging.getLogger(__name__)

EngineGetter = Callable[[str], object]  # role ("subject" | "judge") → engine


def _record(sample: Sample, stage: str, result: Result) -> None:
    outs = sample.setdefault("outputs", {})
    entry = result.model_dump(exclude={"request_id"})
    prev = outs.get(stage)
    outs[stage] = entry if prev is None else (prev if isinstance(prev, list) else [prev]) + [entry]


def _fail(sample: Sample, result: Result) -> None:
    sample["status"] = "over_context" if result.finish_reason == "over_context" else "failed"
    sample["error"] = result.error
    if result.finish_reason == "over_context":
        sample["prompt_tokens"] = result.prompt_tokens


def _run_calls(engine, calls: list[tuple[int, Request]], retries: int, backoff_s: float) -> list[Result]:
    return generate_resilient(engine, [r for _, r in calls], retries=retries, backoff_s=backoff_s)


def _llm_stage(stage: LLMStage, samples: list[Sample], engine, retries: int, backoff_s: float) -> None:
    calls = []
    for i, s in enumerate(samples):
        if s.get("status", "ok") != "ok":
            continue
        req = stage.render(s)
        if req is not None:
            calls.append((i, req.model_copy(update={"request_id": f"{s['sample_id']}:{stage.name}"})))
    results = _run_calls(engine, calls, retries, backoff_s)
    if stage.shrink is not None:
        results = [_shrink_until_fits(stage, samples[i], req, res, engine, retries, backoff_s)
                   for (i, req), res in zip(calls, results)]
    for (i, _), res in zip(calls, results):
        s = samples[i]
        _record(s, stage.name, res)
        if res.ok:
            s.update(stage.accept(s, res))
        else:
            _fail(s, res)


def _shrink_until_fits(stage: LLMStage, sample: Sample, req: Request, res: Result, engine,
                       retries: int, backoff_s: float) -> Result:
    """Apply the stage's truncation policy while the request is over the context."""
    steps = 0
    while res.finish_reason == "over_context" and steps < 10_000:
        smaller = stage.shrink(sample, req, res)
        if smaller is None:
            return res
        req, steps = smaller.model_copy(update={"request_id": req.request_id}), steps + 1
        res = generate_resilient(engine, [req], retries=retries, backoff_s=backoff_s)[0]
    sample.setdefault("truncation_steps", {})[stage.name] = steps
    return res


def _loop_stage(stage: LoopStage, samples: list[Sample], engine, retries: int, backoff_s: float) -> None:
    for _round in range(stage.max_rounds):
        calls, owners = [], []
        for i, s in enumerate(samples):
            if s.get("status", "ok") != "ok":
                continue
            reqs = stage.next_requests(s)
            for j, req in enumerate(reqs):
                calls.append((i, req.model_copy(update={"request_id": f"{s['sample_id']}:{stage.name}:{_round}:{j}"})))
            if reqs:
                owners.append((i, reqs))
        if not calls:
            return
        results = _run_calls(engine, calls, retries, backoff_s)
        pos = 0
        for i, reqs in owners:
            s = samples[i]
            mine = results[pos: pos + len(reqs)]
            pos += len(reqs)
            for res in mine:
                _record(s, stage.name, res)
            bad = next((r for r in mine if not r.ok), None)
            if bad is not None:
                _fail(s, bad)
            else:
                s.update(stage.accept(s, reqs, mine))
    for s in samples:
        if s.get("status", "ok") == "ok" and stage.next_requests(s):
            s["status"], s["error"] = "failed", f"stage {stage.name} did not finish in {stage.max_rounds} rounds"


def process_samples(bench: Benchmark, cfg: BenchmarkConfig, samples: list[Sample], engines: EngineGetter,
                    retries: int = 3, backoff_s: float = 1.0) -> list[Sample]:
    """Run every stage, then per-sample scoring. Mutates and returns ``samples``.

    Fields whose name starts with ``_`` are inputs for rendering only; they are dropped
    before the samples leave the worker.
    """
    for s in samples:
        s.setdefault("status", "ok")
        s.setdefault("error", None)
    for stage in bench.stages(cfg):
        engine = engines(stage.engine)
        if isinstance(stage, LoopStage):
            _loop_stage(stage, samples, engine, retries, backoff_s)
        else:
            _llm_stage(stage, samples, engine, retries, backoff_s)
    for s in samples:
        if s["status"] == "ok":
            s.update(bench.score(cfg, s))
        for key in [k for k in s if k.startswith("_")]:
            del s[key]  # transient inputs (e.g. long conversations) are not stored
    return samples


def group_by_prefix(samples: list[Sample]) -> list[list[Sample]]:
    """Groups of samples sharing a ``prefix_key`` (first-seen order), each longest
    (``prefix_len``) first. A sample without a key is its own group. One group is one
    Ray Data row, so it always reaches one engine replica, back to back."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(str(s.get("prefix_key") or "\x00" + str(s["sample_id"])), []).append(s)
    return [sorted(g, key=lambda s: -int(s.get("prefix_len") or 0)) for g in groups.values()]


def encode(groups: list[list[Sample]]) -> dict[str, list]:
    return {"group": [json.dumps(g) for g in groups]}


def decode(batch: dict) -> list[list[Sample]]:
    return [json.loads(x) for x in batch["group"]]
