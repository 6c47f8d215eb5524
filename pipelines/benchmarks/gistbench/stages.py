"""The four GISTBench steps as runner stages over one user sample, plus per-sample scoring.

Each step is a ``LoopStage``: a round asks for everything still open (every chunk, every
interest...), ``accept`` folds the answers in; an unparsable answer is asked again with a
note (up to the configured retries), then recorded as failed. ``next_requests`` depends on
the sample alone, so ``accept`` can recompute which answer belongs to which item.

Sample fields used: ``_chunks`` (history chunks, most recent first), ``_pool`` (global IS
pool), ``_categories`` (taxonomy list), ``signals``, ``object_name``, ``user_id``, and the
shared assets (``extraction_template``; ``taxonomy_known``: the shared taxonomy cache's
mappings, read on the driver — stages never open the cache file). Fields written:
``extraction``, ``interests``, ``judge``, ``overlap``, ``specificity``, ``categories`` (this
sample's new mappings, committed to the cache when the run is aggregated); ``score_sample``
adds ``interests_scored``, counts and ``taxonomy_hits``.
"""

from __future__ import annotations

from functools import partial

from llmrec.pipelines.protocol import LoopStage, Sample, sample_assets
from llmrec.pipelines.benchmarks.gistbench import parsing, prompts, taxonomy
from llmrec.pipelines.benchmarks.gistbench.config import GistbenchConfig
from llmrec.pipelines.benchmarks.gistbench.history import objects_of, types_of
from llmrec.pipelines.benchmarks.gistbench.specificity import build_test_set, count_correct, overlap_candidates
from llmrec.pipelines.benchmarks.gistbench.verification import count_evidence, evidence_for, failure_modes, verify
from llmrec.types import Request, Result


def _history(s: Sample) -> list[dict]:
    return [e for chunk in s["_chunks"] for e in chunk]


def _done(entry: dict | None) -> bool:
    return entry is not None and entry.get("status") is not None


def _retry_or_fail(entry: dict, text: str, retries: int) -> dict:
    entry = {**entry, "attempts": entry.get("attempts", 0) + 1, "last": text}
    if entry["attempts"] > retries:
        entry["status"] = "unparsable"
    return entry


# ---- 1. extraction -------------------------------------------------------------------------

def _open_chunks(s: Sample) -> list[int]:
    st = s.get("extraction") or {}
    return [i for i in range(len(s["_chunks"])) if not _done(st.get(str(i)))]


def next_extract(cfg: GistbenchConfig, s: Sample) -> list[Request]:
    st = s.get("extraction") or {}
    template = sample_assets(s)["extraction_template"]
    return [prompts.extraction_request(cfg, template, s["object_name"], s["signals"], s["_chunks"][i],
                                       (st.get(str(i)) or {}).get("last")) for i in _open_chunks(s)]


def accept_extract(cfg: GistbenchConfig, s: Sample, requests: list[Request], results: list[Result]) -> dict:
    st = dict(s.get("extraction") or {})
    for i, res in zip(_open_chunks(s), results):
        parsed = parsing.parse_extraction(res.text, cfg.extraction.parsing)
        entry = st.get(str(i)) or {}
        st[str(i)] = ({**entry, "status": "ok", "interests": parsed} if parsed is not None
                      else _retry_or_fail(entry, res.text, cfg.extraction.retries))
    chunks = [st[k]["interests"] for k in sorted(st, key=int) if st[k].get("status") == "ok"]
    return {"extraction": st, "interests": parsing.merge_interests(chunks)}


# ---- 2. IG judge filter --------------------------------------------------------------------

def _cited_in_history(s: Sample, objects: dict[str, str]) -> dict[str, list[str]]:
    return {i["interest"]: [c for c in i["item_ids"] if c in objects] for i in s.get("interests", [])}


def _open_judge(s: Sample) -> list[tuple[str, list[str], dict[str, str]]]:
    objects = objects_of(_history(s))
    st = s.get("judge") or {}
    return [(name, cited, objects) for name, cited in _cited_in_history(s, objects).items()
            if cited and not _done(st.get(name))]


def next_judge(cfg: GistbenchConfig, s: Sample) -> list[Request]:
    st = s.get("judge") or {}
    return [prompts.ig_judge_request(cfg, name, [objects[c] for c in cited], (st.get(name) or {}).get("last"))
            for name, cited, objects in _open_judge(s)]


def accept_judge(cfg: GistbenchConfig, s: Sample, requests: list[Request], results: list[Result]) -> dict:
    st = dict(s.get("judge") or {})
    for (name, cited, _), res in zip(_open_judge(s), results):
        idx = parsing.parse_indices(res.text, len(cited))
        entry = st.get(name) or {}
        if idx is None:
            entry = _retry_or_fail(entry, res.text, cfg.judge.retries)
            entry.setdefault("kept", [])
        else:
            entry = {**entry, "status": "ok" if idx else "none", "kept": [cited[i] for i in idx]}
        st[name] = entry
    return {"judge": st}


# ---- 3. IS: overlap filter, then one retrieval question per interest -------------------------

def _candidates(cfg: GistbenchConfig, s: Sample) -> list[list[str]]:
    mine = set(objects_of(_history(s)))
    return overlap_candidates(s["_pool"], mine, cfg.specificity.exclude_user_objects)


def _overlap_open(cfg: GistbenchConfig, s: Sample) -> bool:
    return (cfg.specificity.overlap_filter and bool(s.get("interests")) and bool(_candidates(cfg, s))
            and not _done(s.get("overlap")))


def _open_is(cfg: GistbenchConfig, s: Sample) -> list[tuple[str, object]]:
    objects = objects_of(_history(s))
    removed = set((s.get("overlap") or {}).get("removed", []))
    cands, st, out = _candidates(cfg, s), s.get("specificity") or {}, []
    for i in s.get("interests", []):
        if _done(st.get(i["interest"])):
            continue
        probe = build_test_set(s["user_id"], i["interest"], i["item_ids"], objects, cands, removed, cfg.specificity)
        if probe.backing:
            out.append((i["interest"], probe))
    return out


def next_specificity(cfg: GistbenchConfig, s: Sample) -> list[Request]:
    if _overlap_open(cfg, s):
        last = (s.get("overlap") or {}).get("last")
        names = [i["interest"] for i in s["interests"]]
        return [prompts.overlap_request(cfg, names, _candidates(cfg, s), last)]
    st = s.get("specificity") or {}
    return [prompts.is_judge_request(cfg, name, probe.items, len(probe.backing), (st.get(name) or {}).get("last"))
            for name, probe in _open_is(cfg, s)]


def accept_specificity(cfg: GistbenchConfig, s: Sample, requests: list[Request], results: list[Result]) -> dict:
    if _overlap_open(cfg, s):
        cands = _candidates(cfg, s)
        idx = parsing.parse_indices(results[0].text, len(cands))
        entry = s.get("overlap") or {}
        if idx is None:
            entry = _retry_or_fail(entry, results[0].text, cfg.judge.retries)
            entry.setdefault("removed", [])
        else:
            entry = {**entry, "status": "ok", "removed": [cands[i][0] for i in idx]}
        return {"overlap": entry}
    st = dict(s.get("specificity") or {})
    for (name, probe), res in zip(_open_is(cfg, s), results):
        idx = parsing.parse_selection(res.text, len(probe.items))
        entry = {**(st.get(name) or {}), "backing": probe.backing, "test_ids": probe.ids}
        if idx is None:
            entry = _retry_or_fail(entry, res.text, cfg.judge.retries)
            entry.update(selected=[], correct=0)
        else:
            selected = [probe.items[i][0] for i in idx]
            entry.update(status="ok", selected=selected, correct=count_correct(selected, probe.backing))
        st[name] = entry
    return {"specificity": st}


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
    """extract → judge → specificity → taxonomy, each present only when its step is on."""
    out = [LoopStage("extract", partial(next_extract, cfg), partial(accept_extract, cfg), engine="subject",
                     requires=("object_name", "signals", "_chunks"), adds=("extraction", "interests"))]
    if cfg.judge.enabled:
        out.append(LoopStage("judge", partial(next_judge, cfg), partial(accept_judge, cfg), engine=cfg.judge.engine,
                             requires=("_chunks",), adds=("judge",)))
        if cfg.specificity.enabled:
            out.append(LoopStage("specificity", partial(next_specificity, cfg), partial(accept_specificity, cfg),
                                 engine=cfg.judge.engine, requires=("user_id", "_chunks", "_pool"),
                                 adds=("overlap", "specificity")))
    if cfg.taxonomy.mapper == "llm":
        out.append(LoopStage("taxonomy", partial(next_taxonomy, cfg), partial(accept_taxonomy, cfg),
                             engine=cfg.taxonomy.engine, requires=("_categories",), adds=("categories",)))
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
    judged, spec = s.get("judge") or {}, s.get("specificity") or {}
    names = [i["interest"] for i in s.get("interests", [])]
    cached = _known(s) if cfg.taxonomy.mapper != "none" else {}
    mine = s.get("categories") or {}
    recs = []
    for item in s.get("interests", []):
        name = item["interest"]
        kept = (judged.get(name) or {}).get("kept", []) if cfg.judge.enabled else [c for c in item["item_ids"] if c in objects]
        evidence = evidence_for(kept, types)
        counts = count_evidence(evidence)
        ok = verify(counts, s["signals"], cfg.thresholds)
        probe = spec.get(name) or {}
        rec = {"interest": name, "category_id": _category(cfg, s, name, cached), "verified": ok,
               "evidence": evidence, "counts": counts, "correct": int(probe.get("correct", 0)),
               "backing": len(probe.get("backing", [])) if "correct" in probe else 0}
        if not ok:
            rec.update(failure_modes(counts, s["signals"], cfg.thresholds))
        recs.append(rec)
    ext = s.get("extraction") or {}
    return {"interests_scored": recs, "n_interests": len(recs), "n_verified": sum(r["verified"] for r in recs),
            "n_chunks": len(s["_chunks"]),
            "taxonomy_hits": sum(1 for n in dict.fromkeys(names) if n not in mine and n in cached),
            "failed_chunks": sum(1 for e in ext.values() if e.get("status") == "unparsable")}
