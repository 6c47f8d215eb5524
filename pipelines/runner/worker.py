"""Run a benchmark's stages over a batch of samples (plain Python; Ray calls it per batch).

Per stage, the requests of all still-healthy samples of the batch go to the engine
together (engines batch them), results are folded back with the stage's ``accept``.
Failures stay with their sample: a failed or over-context request, a field a stage reads
that the sample lacks, an output that does not match the declared record (an undeclared key,
a wrong type), or an exception raised by the benchmark's ``render`` / ``accept`` / ``score``
for one sample marks that sample (``status``, ``error``, ``failed_stage``) and skips its later
stages; the other samples of the batch go on. ``render`` and ``next_requests`` see a read-only
view of the sample.

Transcripts: given a ``texts`` dict, every engine call's stored result (``outputs``) also holds its request
reference (``llmrec.transcripts.request_ref``: the role of the stage's engine, each message by its text's key, the
prompt an engine rendered itself, sampling, constraint) and the texts are collected in ``texts`` (key → text), which
travel back to the driver once per batch (``encode``) to be stored once per run.
"""

from __future__ import annotations

import json
import logging
import pickle
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable

from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import (Benchmark, BenchmarkConfig, LLMStage, LoopStage, Sample, Stage,
                                       attach_assets, record_schema)
from llmrec.pipelines.record import RecordSchema
from llmrec.serving.resilience import generate_resilient
from llmrec.transcripts import request_ref
from llmrec.types import Request, Result

if TYPE_CHECKING:
    from llmrec.pipelines.runner.judges import JudgingSpec

log = logging.getLogger(__name__)

EngineGetter = Callable[[str], object]  # role ("subject" | "judge") → engine
Texts = dict[str, str]  # a batch's transcript texts: key → text (see llmrec.transcripts)


def _ok(sample: Sample) -> bool:
    return sample.get("status", "ok") == "ok"


def _record(sample: Sample, stage: str, result: Result, request: Request | None = None, role: str = "subject",
            texts: Texts | None = None) -> None:
    """Store one engine call's result with the sample; with ``texts``, also the reference of the ``request`` it
    answered (the engine's rendered prompt moves from the result into the reference: its text is stored once)."""
    outs = sample.setdefault("outputs", {})
    skip = {"request_id", "prompt_text"} | {k for k in ("context_limit", "computed_for") if getattr(result, k) is None}
    entry = result.model_dump(exclude=skip)
    if texts is not None and request is not None:
        entry["request"] = request_ref(request, texts, role, result.prompt_text)
        entry["request"]["seq"] = sum(len(v) if isinstance(v, list) else 1 for v in outs.values())  # call order
    prev = outs.get(stage)
    outs[stage] = entry if prev is None else (prev if isinstance(prev, list) else [prev]) + [entry]


def _fail(sample: Sample, stage: str, result: Result) -> None:
    sample["status"] = "over_context" if result.finish_reason == "over_context" else "failed"
    sample["error"] = result.error
    sample["failed_stage"] = stage
    if result.finish_reason == "over_context":
        sample["prompt_tokens"] = result.prompt_tokens


def _fail_with(sample: Sample, stage: str, message: str) -> None:
    sample["status"], sample["error"], sample["failed_stage"] = "failed", message, stage
    log.warning("sample %s failed in %s: %s", sample.get("sample_id"), stage, message)


def _guard(sample: Sample, stage: str, what: str, fn: Callable, *args):
    """Call a benchmark function for one sample; an exception fails that sample only.
    Returns (ok, value)."""
    try:
        return True, fn(*args)
    except Exception as e:  # noqa: BLE001 - a benchmark bug or bad record stays with its sample
        _fail_with(sample, stage, f"{what} raised {type(e).__name__}: {e}")
        return False, None


def _entry_ok(stage: Stage, sample: Sample) -> bool:
    missing = [k for k in stage.reads if k not in sample]
    if missing:
        _fail_with(sample, stage.name, f"stage '{stage.name}' reads field(s) {missing} missing from sample "
                                       f"'{sample.get('sample_id')}'; fields present: {sorted(sample)}")
        sample["missing"] = missing
        return False
    return True


def _merge(schema: RecordSchema, stage: str, allowed, sample: Sample, fields: dict) -> None:
    """Apply a stage's (or score's) output: only ``allowed`` keys, each value of its declared type."""
    extra = sorted(set(fields) - set(allowed))
    problem = (f"returned undeclared field(s) {extra} (declared: {sorted(allowed)})" if extra
               else schema.check_fields(fields))
    if problem:
        _fail_with(sample, stage, f"{stage} output for sample '{sample.get('sample_id')}': {problem}")
        return
    sample.update(fields)


def _view(sample: Sample) -> MappingProxyType:
    return MappingProxyType(sample)


def _llm_stage(schema: RecordSchema, stage: LLMStage, samples: list[Sample], engine, retries: int,
               backoff_s: float, texts: Texts | None = None) -> None:
    calls = []
    for i, s in enumerate(samples):
        if not _ok(s) or not _entry_ok(stage, s):
            continue
        ok, req = _guard(s, stage.name, "render", stage.render, _view(s))
        if ok and req is not None:
            calls.append((i, req.model_copy(update={"request_id": f"{s['sample_id']}:{stage.name}"})))
    sent = [r for _, r in calls]
    results = generate_resilient(engine, sent, retries=retries, backoff_s=backoff_s)
    if stage.shrink is not None:  # the request stored with a result is the last one sent: the one that fit
        final = [_shrink_until_fits(stage, samples[i], req, res, engine, retries, backoff_s)
                 for (i, req), res in zip(calls, results)]
        sent, results = [f[0] for f in final], [f[1] for f in final]
    for (i, _), req, res in zip(calls, sent, results):
        s = samples[i]
        _record(s, stage.name, res, req, stage.engine, texts)
        if not res.ok:
            _fail(s, stage.name, res)
            continue
        ok, fields = _guard(s, stage.name, "accept", stage.accept, s, res)
        if ok:
            _merge(schema, stage.name, stage.writes, s, fields)


def _shrink_until_fits(stage: LLMStage, sample: Sample, req: Request, res: Result, engine,
                       retries: int, backoff_s: float) -> tuple[Request, Result]:
    """Apply the stage's truncation policy while the request is over the context. Returns the last request
    sent and its result."""
    steps = 0
    while res.finish_reason == "over_context" and steps < 10_000:
        ok, smaller = _guard(sample, stage.name, "shrink", stage.shrink, sample, req, res)
        if not ok:
            return req, Result(finish_reason="error", error=sample["error"], request_id=req.request_id)
        if smaller is None:
            return req, res
        req, steps = smaller.model_copy(update={"request_id": req.request_id}), steps + 1
        res = generate_resilient(engine, [req], retries=retries, backoff_s=backoff_s)[0]
    sample.setdefault("truncation_steps", {})[stage.name] = steps
    return req, res


def _next_round(stage: LoopStage, samples: list[Sample], rnd: int):
    calls, owners = [], []
    for i, s in enumerate(samples):
        if not _ok(s):
            continue
        ok, reqs = _guard(s, stage.name, "next_requests", stage.next_requests, _view(s))
        if not ok or not reqs:
            continue
        for j, req in enumerate(reqs):
            calls.append(req.model_copy(update={"request_id": f"{s['sample_id']}:{stage.name}:{rnd}:{j}"}))
        owners.append((i, len(reqs)))
    return calls, owners


def _loop_stage(schema: RecordSchema, stage: LoopStage, samples: list[Sample], engine, retries: int,
                backoff_s: float, texts: Texts | None = None) -> None:
    for s in samples:
        if _ok(s):
            _entry_ok(stage, s)
    for rnd in range(stage.max_rounds):
        calls, owners = _next_round(stage, samples, rnd)
        if not calls:
            return
        results = generate_resilient(engine, calls, retries=retries, backoff_s=backoff_s)
        pos = 0
        for i, n in owners:
            s, reqs, mine = samples[i], calls[pos: pos + n], results[pos: pos + n]
            pos += n
            for req, res in zip(reqs, mine):
                _record(s, stage.name, res, req, stage.engine, texts)
            bad = next((r for r in mine if not r.ok), None)
            if bad is not None:
                _fail(s, stage.name, bad)
                continue
            ok, fields = _guard(s, stage.name, "accept", stage.accept, s, reqs, mine)
            if ok:
                _merge(schema, stage.name, stage.writes, s, fields)
    for s in samples:
        if _ok(s):
            ok, more = _guard(s, stage.name, "next_requests", stage.next_requests, _view(s))
            if ok and more:
                _fail_with(s, stage.name, f"stage {stage.name} did not finish in {stage.max_rounds} rounds")


def process_samples(bench: Benchmark, cfg: BenchmarkConfig, samples: list[Sample], engines: EngineGetter,
                    retries: int = 3, backoff_s: float = 1.0, assets: dict | None = None,
                    texts: Texts | None = None, judging: JudgingSpec | None = None) -> list[Sample]:
    """Run every stage, then per-sample scoring. Mutates and returns ``samples``.

    ``texts``: collect transcripts (every call's request reference beside its result; the texts here, see
    ``llmrec.transcripts``); None: results only.

    ``judging`` (a ``runner.judges.JudgingSpec``, built and checked on the driver): judge stages send pinned
    sampling; a jury runs the benchmark's judge stages once per juror (``runner.judges.run_jury``); ``only`` runs just the named stages (`llmrec rejudge`).

    ``assets``: the benchmark's shared read-only data (``HasAssets.assets``), attached to every
    sample as ``sample[ASSETS_KEY]``. Fields whose name starts with ``_`` are inputs for
    rendering only; they are dropped before the samples leave the worker.
    """
    schema = record_schema(bench)
    attach_assets(samples, assets)
    for s in samples:
        s.setdefault("status", "ok")
        s.setdefault("error", None)
    from llmrec.pipelines.runner import judges

    def run_stage(stage: Stage, batch: list[Sample], engine) -> None:
        run = _loop_stage if isinstance(stage, LoopStage) else _llm_stage
        run(schema, stage, batch, engine, retries, backoff_s, texts)

    only = judging.only if judging is not None else None
    stages = [st for st in bench.stages(cfg) if not only or st.name in only]
    jury = [st for st in stages if st.name in caps.judge_stages(bench)] if judging is not None and judging.jury else []
    for stage in stages:
        if not any(_ok(s) for s in samples):
            break
        if jury and stage is jury[0]:  # the jury runs the judge stages as one block, once per juror
            judges.run_jury(bench, cfg, jury, samples, engines, run_stage, judging,
                            lambda s, name, fields: _merge(schema, name, {f for st in jury for f in st.writes}, s,
                                                           fields))
        elif stage not in jury:
            engine = engines(stage.engine)
            run_stage(stage, samples, judges.pinned(engine, judging) if stage.engine == "judge" else engine)
    for s in samples:
        if s["status"] == "ok":
            ok, fields = _guard(s, "score", "score", bench.score, cfg, _view(s))
            if ok:
                _merge(schema, "score", bench.payload.model_fields, s, fields)
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


def pack(group: list[Sample]):
    """One prefix group as one dataset cell: the samples as they are (pickled, no JSON round trip)."""
    return pickle.dumps(group, protocol=pickle.HIGHEST_PROTOCOL)


def encode(groups: list[list[Sample]], timings: dict[str, float] | None = None,
           texts: Texts | None = None) -> dict[str, list]:
    """One row per prefix group (``pack``); a batch's ``timings`` (seconds) and transcript ``texts`` (each distinct
    text of the batch once, encoded once) ride on its first row."""
    import numpy as np

    cells = np.empty(len(groups), dtype=object)  # bytes kept whole (a plain array would be fixed-width "S")
    cells[:] = [pack(g) for g in groups]
    out: dict[str, list] = {"group": cells}
    if timings is not None:
        out["timing"] = [json.dumps(timings if i == 0 else {}) for i in range(len(groups))]
    if texts is not None:
        out["texts"] = [json.dumps(texts) if i == 0 else "{}" for i in range(len(groups))]
    return out


def batch_texts(batch: dict) -> Texts:
    """The transcript texts a worker put on a batch's rows (see ``encode``); {} without capture."""
    out: Texts = {}
    for t in batch.get("texts", ()):
        out.update(json.loads(t))
    return out


def batch_timings(batch: dict) -> dict[str, float]:
    """The summed ``timings`` a worker put on a batch's rows (see ``encode``)."""
    out: dict[str, float] = {}
    for t in batch.get("timing", ()):
        for k, v in json.loads(t).items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


def decode(batch: dict) -> list[list[Sample]]:
    """The prefix groups of a batch's rows (see ``pack``)."""
    return [pickle.loads(x) for x in batch["group"]]
