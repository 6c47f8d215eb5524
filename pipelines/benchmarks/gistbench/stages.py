"""The four GISTBench steps as runner stages over one user sample, plus per-sample scoring.

Extraction, the IG judge and IS are re-ask stages (``common.reask``): a round asks every
question still open (every chunk, every interest...); an answer that does not parse is asked
again with a note quoting it (up to the configured retries), then recorded as ``missed``. The
questions depend on the sample alone, so each round can tell which answer belongs to which.

Sample fields used: ``_chunks`` (history chunks, most recent first), ``_pool`` (global IS
pool), ``_categories`` (taxonomy list), ``signals``, ``object_name``, ``user_id``, and the
shared assets (``extraction_template``; ``taxonomy_known``: the shared taxonomy cache's
mappings, read on the driver — stages never open the cache file). Fields written:
``extraction`` (per chunk: the interests), ``interests``, ``judge`` (per interest: the kept objects),
``overlap`` (the pool objects removed), ``specificity`` (per interest: the selected objects, with
``backing`` and ``test_ids``) — each a ``common.reask`` question state — and ``categories`` (this
sample's new mappings, committed to the cache when the run is aggregated); ``score_sample``
adds ``interests_scored``, counts and ``taxonomy_hits``.
"""

from __future__ import annotations

from functools import partial

from llmrec.pipelines.common import reask
from llmrec.pipelines.common.reask import Ask, reask_stage
from llmrec.pipelines.protocol import LoopStage, Sample, sample_assets
from llmrec.pipelines.benchmarks.gistbench import parsing, prompts, taxonomy
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.benchmarks.gistbench.history import objects_of, types_of
from llmrec.pipelines.benchmarks.gistbench.specificity import build_test_set, count_correct, overlap_candidates
from llmrec.pipelines.benchmarks.gistbench.verification import count_evidence, evidence_for, failure_modes, verify
from llmrec.types import Request, Result


def _history(s: Sample) -> list[dict]:
    return [e for chunk in s["_chunks"] for e in chunk]


def _last_text(state: dict) -> str | None:
    """The reply the re-ask quotes with its note (None on a first attempt)."""
    return state["texts"][-1] if state["texts"] else None


# ---- 1. extraction -------------------------------------------------------------------------

def asks_extract(cfg: GistbenchConfig, s: Sample) -> list[Ask]:
    template = sample_assets(s)["extraction_template"]

    def ask(i: int) -> Ask:
        return Ask("extraction", str(i),
                   lambda st: [prompts.extraction_request(cfg, template, s["object_name"], s["signals"],
                                                          s["_chunks"][i], _last_text(st))],
                   lambda texts: parsing.parse_extraction(texts[0], cfg.extraction.parsing))
    return [ask(i) for i in range(len(s["_chunks"]))]


def fold_extract(s: Sample) -> dict:
    st = reask.states(s, "extraction")
    return {"interests": parsing.merge_interests([st[k]["answer"] for k in sorted(st, key=int)
                                                  if st[k]["state"] == reask.OK])}


# ---- 2. IG judge filter --------------------------------------------------------------------

def _cited_in_history(s: Sample, objects: dict[str, str]) -> dict[str, list[str]]:
    return {i["interest"]: [c for c in i["item_ids"] if c in objects] for i in s.get("interests", [])}


def asks_judge(cfg: GistbenchConfig, s: Sample) -> list[Ask]:
    """One question per interest citing objects of the history; the answer is the kept objects."""
    objects = objects_of(_history(s))

    def ask(name: str, cited: list[str]) -> Ask:
        def parse(texts: list[str]) -> list[str] | None:
            idx = parsing.parse_indices(texts[0], len(cited))
            return None if idx is None else [cited[i] for i in idx]
        return Ask("judge", name,
                   lambda st: [prompts.ig_judge_request(cfg, name, [objects[c] for c in cited], _last_text(st))],
                   parse)
    return [ask(name, cited) for name, cited in _cited_in_history(s, objects).items() if cited]


# ---- 3. IS: overlap filter, then one retrieval question per interest -------------------------

OVERLAP = "filter"  # the one question of the ``overlap`` field; its answer: the pool objects removed


def _candidates(cfg: GistbenchConfig, s: Sample) -> list[list[str]]:
    mine = set(objects_of(_history(s)))
    return overlap_candidates(s["_pool"], mine, cfg.specificity.exclude_user_objects)


def _overlap_open(cfg: GistbenchConfig, s: Sample) -> bool:
    return (cfg.specificity.overlap_filter and bool(s.get("interests")) and bool(_candidates(cfg, s))
            and reask.pending(s, "overlap", OVERLAP))


def _overlap_ask(cfg: GistbenchConfig, s: Sample) -> Ask:
    cands, names = _candidates(cfg, s), [i["interest"] for i in s["interests"]]

    def parse(texts: list[str]) -> list[str] | None:
        idx = parsing.parse_indices(texts[0], len(cands))
        return None if idx is None else [cands[i][0] for i in idx]
    return Ask("overlap", OVERLAP, lambda st: [prompts.overlap_request(cfg, names, cands, _last_text(st))], parse)


def asks_specificity(cfg: GistbenchConfig, s: Sample) -> list[Ask]:
    """The overlap filter first (when on), then one question per interest with backing objects:
    the answer is the objects the judge selected; ``backing`` / ``test_ids`` are kept with it."""
    if _overlap_open(cfg, s):
        return [_overlap_ask(cfg, s)]
    objects = objects_of(_history(s))
    removed = set(reask.answer(s, "overlap", OVERLAP) or [])
    cands, out = _candidates(cfg, s), []
    for i in s.get("interests", []):
        probe = build_test_set(s["user_id"], i["interest"], i["item_ids"], objects, cands, removed, cfg.specificity)
        if probe.backing:
            out.append(_is_ask(cfg, i["interest"], probe))
    return out


def _is_ask(cfg: GistbenchConfig, name: str, probe) -> Ask:
    def parse(texts: list[str]) -> list[str] | None:
        idx = parsing.parse_selection(texts[0], len(probe.items))
        return None if idx is None else [probe.items[i][0] for i in idx]
    return Ask("specificity", name,
               lambda st: [prompts.is_judge_request(cfg, name, probe.items, len(probe.backing), _last_text(st))],
               parse, info={"backing": probe.backing, "test_ids": probe.ids})


# ---- 4. taxonomy (llm mapper) ----------------------------------------------------------------

def _known(s: Sample) -> dict[str, int]:
    """The shared cache's mappings, read on the driver when the run was planned."""
    return sample_assets(s)["taxonomy_known"]


def next_taxonomy(cfg: GistbenchConfig, s: Sample) -> list[Request]:
    mine, known = s.get("categories") or {}, _known(s)
    names = [i["interest"] for i in s.get("interests", []) if i["interest"] not in mine and i["interest"] not in known]
    return [prompts.taxonomy_request(cfg, batch, s["_categories"])
            for batch in taxonomy.batches(names, cfg.taxonomy.batch_size)]


def accept_taxonomy(cfg: GistbenchConfig, s: Sample, requests: list[Request], results: list[Result]) -> dict:
    valid = {int(c[0]) for c in s["_categories"]}
    mapping: dict[str, int] = {}
    for req, res in zip(requests, results):
        names = prompts.taxonomy_batch_names(req)
        got = parsing.parse_taxonomy(res.text, len(names), valid)
        mapping.update({n: got.get(i, taxonomy.OTHER) for i, n in enumerate(names)})
    # the shared cache is written on the driver, at aggregation (first writer wins there)
    return {"categories": {**(s.get("categories") or {}), **mapping}}


def build_stages(cfg: GistbenchConfig) -> list[LoopStage]:
    """extract → judge → specificity → taxonomy, each present only when its step is on. The first three
    re-ask an answer that does not parse (with a note quoting it), ``retries`` times."""
    out = [reask_stage("extract", partial(asks_extract, cfg), cfg.extraction.retries + 1, fields=("extraction",),
                       fold=fold_extract, folds=("interests",), engine="subject",
                       reads=("object_name", "signals", "_chunks"))]
    if cfg.judge.enabled:
        attempts = cfg.judge.retries + 1
        out.append(reask_stage("judge", partial(asks_judge, cfg), attempts, fields=("judge",),
                               engine=cfg.judge.engine, reads=("_chunks",)))
        if cfg.specificity.enabled:  # the overlap question, then the IS questions
            out.append(reask_stage("specificity", partial(asks_specificity, cfg), attempts,
                                   fields=("overlap", "specificity"), engine=cfg.judge.engine,
                                   max_rounds=2 * attempts + 1, reads=("user_id", "_chunks", "_pool")))
    if cfg.taxonomy.mapper == "llm":
        out.append(LoopStage("taxonomy", partial(next_taxonomy, cfg), partial(accept_taxonomy, cfg),
                             engine=cfg.taxonomy.engine, reads=("_categories",), writes=("categories",)))
    return out


# ---- per-sample scoring ----------------------------------------------------------------------

def _category(cfg: GistbenchConfig, s: Sample, name: str, cached: dict[str, int]) -> int | None:
    if cfg.taxonomy.mapper == "none":
        return taxonomy.own_category(name)
    found = (s.get("categories") or {}).get(name, cached.get(name))
    if found is None and cfg.taxonomy.mapper == "llm":
        return taxonomy.OTHER
    return found  # embedding: filled when the run is aggregated


def score_sample(cfg: GistbenchConfig, s: Sample) -> dict:
    """Per interest: judge-kept evidence, verification, failure modes, IS counts, category."""
    history = _history(s)
    types, objects = types_of(history), objects_of(history)
    names = [i["interest"] for i in s.get("interests", [])]
    cached = _known(s) if cfg.taxonomy.mapper != "none" else {}
    mine = s.get("categories") or {}
    recs = []
    for item in s.get("interests", []):
        name = item["interest"]
        kept = (reask.answer(s, "judge", name) or []) if cfg.judge.enabled else [c for c in item["item_ids"] if c in objects]
        evidence = evidence_for(kept, types)
        counts = count_evidence(evidence)
        ok = verify(counts, s["signals"], cfg.thresholds)
        probe = reask.state(s, "specificity", name)
        rec = {"interest": name, "category_id": _category(cfg, s, name, cached), "verified": ok,
               "evidence": evidence, "counts": counts,
               "correct": count_correct(probe["answer"] or [], probe["backing"]) if probe else 0,
               "backing": len(probe["backing"]) if probe else 0}
        if not ok:
            rec.update(failure_modes(counts, s["signals"], cfg.thresholds))
        recs.append(rec)
    return {"interests_scored": recs, "n_interests": len(recs), "n_verified": sum(r["verified"] for r in recs),
            "n_chunks": len(s["_chunks"]),
            "taxonomy_hits": sum(1 for n in dict.fromkeys(names) if n not in mine and n in cached),
            "failed_chunks": reask.tally(reask.states(s, "extraction").values()).missed}
