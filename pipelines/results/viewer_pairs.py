"""`llmrec view A B`: two runs' samples paired by id, what changed between them, and word-level diffs.

:class:`PairIndex` sits on a :class:`~llmrec.pipelines.results.viewer.Viewer` over both sides' runs (read once, as
`llmrec view` reads them) and pairs each run of A with its run of B: two plain runs with each other; the runs of two
suites by subject and entry (by entry alone where that is unambiguous). Each paired sample gets a *change*:
``right→wrong`` (a regression), ``wrong→right``, another verdict change, the same verdict with a different output,
unchanged, or present on one side only. The list is ordered by that change (regressions first), so a filter is a
boolean mask over a frame sorted once. A pair page shows both runs' calls side by side, with a word-level diff
(:func:`word_diff`, difflib) of each call's output and of its request where the two differ.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Iterable
from urllib.parse import urlencode

import numpy as np
import pandas as pd

from llmrec.errors import ConfigError
from llmrec.pipelines.results.stored import StoredRun, open_runs
from llmrec.pipelines.results.viewer import PAGE_SIZE, SEP, VERDICTS, Viewer, _head, sample_path
from llmrec.transcripts import calls

# the change kinds, in the order the list shows them (regressions first); the filter's values
CHANGES = ("right→wrong", "wrong→right", "verdict changed", "output or request changed", "unchanged", "only in A",
           "only in B")
CHANGED = CHANGES[:3]  # what the "changed" filter takes: the verdict differs
PAIR_FILTERS = ("benchmark", "entry", "setting", "change", "verdict_a", "verdict_b")
TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
MAX_WORDS = 20_000  # a replaced stretch longer than this (in tokens, both sides) is shown as deleted + inserted
FOLD = 600  # an unchanged stretch longer than this shows its head and tail, the middle behind an expander
FOLD_KEEP = 200


def pair_runs(runs_a: list[StoredRun], runs_b: list[StoredRun]) -> tuple[list[tuple[StoredRun, StoredRun]], list[str]]:
    """The runs of A paired with the runs of B, and notes naming the runs left without a partner. Two plain runs
    pair with each other; otherwise runs pair by (subject, entry), then by entry alone where each side holds one."""
    if len(runs_a) == 1 and len(runs_b) == 1:
        a, b = runs_a[0], runs_b[0]
        differ = [f"A is a {a.benchmark} run, B a {b.benchmark} run: samples pair only where their ids are equal"]
        return [(a, b)], differ if a.benchmark != b.benchmark else []
    key = lambda r: (r.subject, r.suite_entry or r.entry)  # noqa: E731
    b_by = {key(r): r for r in runs_b}
    pairs = [(a, b_by[key(a)]) for a in runs_a if key(a) in b_by]
    left_a = [a for a in runs_a if key(a) not in b_by]
    used = {id(b) for _, b in pairs}
    left_b = [b for b in runs_b if id(b) not in used]
    for a in list(left_a):
        entry = a.suite_entry or a.entry
        same_a = [r for r in left_a if (r.suite_entry or r.entry) == entry]
        same_b = [r for r in left_b if (r.suite_entry or r.entry) == entry]
        if len(same_a) == 1 and len(same_b) == 1:
            pairs.append((a, same_b[0]))
            left_a.remove(a)
            left_b.remove(same_b[0])
    notes = [f"A's run {r.label} has no partner among B's runs (paired by subject and entry)" for r in left_a]
    notes += [f"B's run {r.label} has no partner among A's runs (paired by subject and entry)" for r in left_b]
    return pairs, notes


def _calls_key(row: dict) -> tuple:
    """What tells two runs' calls of a sample apart: each call's output, error and request reference (its texts
    are content-addressed, so equal references are equal messages)."""
    return tuple((c.stage, c.index, str(c.result.get("text") or ""), str(c.result.get("error") or ""),
                  repr(sorted((k, repr(v)) for k, v in (c.request or {}).items() if k != "seq")))
                 for c in calls(row))


def change_of(va: str, vb: str, same_calls: bool) -> str:
    if va == vb:
        return "unchanged" if same_calls else "output or request changed"
    if va == "right" and vb == "wrong":
        return "right→wrong"
    if va == "wrong" and vb == "right":
        return "wrong→right"
    return "verdict changed"


class PairIndex:
    """Both sides' samples paired by id (see the module's doc); ``viewer`` holds every run of A and of B."""

    def __init__(self, viewer: Viewer, pairs: list[tuple[StoredRun, StoredRun]], notes: list[str]):
        if not pairs:
            raise ConfigError("no run of A pairs with a run of B: " + "; ".join(notes))
        self.viewer, self.pairs, self.notes = viewer, pairs, notes
        idx = viewer.index
        outs = {}
        frames = []
        for p, (ra, rb) in enumerate(pairs):
            sides = []
            for side, run in (("a", ra), ("b", rb)):
                sel = idx[idx["run"] == run.key]
                sides.append(pd.DataFrame({"sample_id": sel["sample_id"].to_numpy(), f"i{side}": sel.index.to_numpy(),
                                           f"verdict_{side}": sel["verdict"].to_numpy(),
                                           f"setting_{side}": sel["setting"].to_numpy()}))
                for i, r in zip(sel.index, sel["row"]):
                    outs[i] = _calls_key(viewer.rows[run.key][int(r)])
            m = sides[0].merge(sides[1], on="sample_id", how="outer", sort=False)
            m["pair"] = str(p)
            m["benchmark"], m["entry"] = ra.benchmark, ra.suite_entry or ra.entry
            frames.append(m)
        f = pd.concat(frames, ignore_index=True)
        f["ia"] = f["ia"].fillna(-1).astype(int)
        f["ib"] = f["ib"].fillna(-1).astype(int)
        f["setting"] = f["setting_a"].where(f["ia"] >= 0, f["setting_b"]).fillna("")
        f["verdict_a"] = f["verdict_a"].fillna("")
        f["verdict_b"] = f["verdict_b"].fillna("")
        change = []
        for ia, ib, va, vb in zip(f["ia"], f["ib"], f["verdict_a"], f["verdict_b"]):
            if ib < 0:
                change.append("only in A")
            elif ia < 0:
                change.append("only in B")
            else:
                change.append(change_of(va, vb, outs[ia] == outs[ib]))
        f["change"] = change
        f["rank"] = f["change"].map({c: i for i, c in enumerate(CHANGES)})
        f["order"] = np.arange(len(f))
        self.index = f.sort_values(["rank", "order"], kind="stable").reset_index(drop=True)[
            ["pair", "sample_id", "benchmark", "entry", "setting", "change", "verdict_a", "verdict_b", "ia", "ib"]]
        self.by_id = {(p, s): i for i, (p, s) in enumerate(zip(self.index["pair"], self.index["sample_id"]))}
        self.options = {k: sorted(set(self.index[k])) for k in ("benchmark", "entry", "setting")}
        self.options["change"] = ["changed", *[c for c in CHANGES if c in set(self.index["change"])]]
        self.options["verdict_a"] = self.options["verdict_b"] = list(VERDICTS)
        self.counts = self.index["change"].value_counts().to_dict()

    @classmethod
    def open(cls, a: str | Path, b: str | Path) -> "PairIndex":
        runs_a = open_runs([str(a)])
        runs_b = [replace(r, key=str(len(runs_a) + i)) for i, r in enumerate(open_runs([str(b)]))]
        pairs, notes = pair_runs(runs_a, runs_b)
        return cls(Viewer(runs_a + runs_b, [str(a), str(b)]), pairs, notes)

    def query(self, filters: dict[str, str], text: str = "") -> pd.DataFrame:
        mask = np.ones(len(self.index), dtype=bool)
        for k in PAIR_FILTERS:
            v = filters.get(k)
            if not v:
                continue
            if k == "change" and v == "changed":
                mask &= self.index["change"].isin(CHANGED).to_numpy()
            else:
                mask &= (self.index[k] == v).to_numpy()
        if text.strip():
            hit = self.viewer._contains(text.strip().casefold().replace(SEP, " "))
            hit = np.append(hit, False)  # index -1 (no row on that side): no hit
            mask &= hit[self.index["ia"].to_numpy()] | hit[self.index["ib"].to_numpy()]
        return self.index[mask]

    def page(self, filters: dict[str, str], text: str = "", page: int = 1, size: int = PAGE_SIZE) -> dict:
        hits = self.query(filters, text)
        pages = max(1, math.ceil(len(hits) / size))
        page = min(max(1, page), pages)
        rows = []
        v = self.viewer
        for rec in hits.iloc[(page - 1) * size: page * size].itertuples(index=False):
            sides = {}
            for side, i in (("a", rec.ia), ("b", rec.ib)):
                if i < 0:
                    sides[side] = None
                    continue
                ex = v.explained[(v.index["run"].iat[i], int(v.index["row"].iat[i]))]
                sides[side] = {"verdict": ex.verdict or "", "status": v.index["status"].iat[i],
                               "answer": _head(ex.answer, 100), "reason": _head(ex.reason, 120)}
            rows.append({"pair": rec.pair, "sample_id": rec.sample_id, "setting": rec.setting, "change": rec.change,
                         "a": sides["a"], "b": sides["b"], "href": pair_path(rec.pair, rec.sample_id)})
        return {"rows": rows, "total": len(hits), "page": page, "pages": pages}

    def sample(self, pair: str, sample_id: str) -> dict:
        """What a pair page shows: each side's sample (as the one-run page shows it; None where absent), the
        change, and per call (matched by stage, index and engine role) the diffs of its output and request."""
        hit = self.by_id.get((pair, sample_id))
        if hit is None:
            raise KeyError(f"no sample {sample_id!r} in pair {pair} of {' vs '.join(self.viewer.sources)}")
        rec = self.index.iloc[hit]
        v = self.viewer
        sides = {}
        for side, i in (("a", int(rec["ia"])), ("b", int(rec["ib"]))):
            if i < 0:
                sides[side] = None
                continue
            run = v.by_key[v.index["run"].iat[i]]
            sides[side] = {**v.sample(run, v.rows[run.key][int(v.index["row"].iat[i])]),
                           "href": sample_path(run.key, sample_id)}
        ra, rb = self.pairs[int(pair)]
        diffs = call_diffs(sides["a"]["calls"], sides["b"]["calls"]) if sides["a"] and sides["b"] else []
        return {"pair": pair, "sample_id": sample_id, "change": rec["change"], "setting": rec["setting"],
                "run_a": ra, "run_b": rb, "a": sides["a"], "b": sides["b"], "diffs": diffs}


def pair_path(pair: str, sample_id: str) -> str:
    return "/pair?" + urlencode({"pair": pair, "id": sample_id})


def pairs_path(**filters: str) -> str:
    return "/pairs" + ("?" + urlencode({k: v for k, v in filters.items() if v}) if any(filters.values()) else "")


# ---- diffs ----------------------------------------------------------------------------------------------------

def _merge(segments: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for op, text in segments:
        if not text:
            continue
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))
    return out


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """``a`` → ``b`` as segments ``(op, text)``, op ``same`` / ``del`` / ``ins``: lines matched first (difflib), then
    the words (and spaces, punctuation) of each replaced stretch of lines; joining the ``same`` and ``del`` texts
    gives ``a``, the ``same`` and ``ins`` texts ``b``."""
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        ta, tb = "".join(la[i1:i2]), "".join(lb[j1:j2])
        if op == "equal":
            out.append(("same", ta))
        elif op != "replace":
            out += [("del", ta), ("ins", tb)]
        else:
            wa, wb = TOKEN.findall(ta), TOKEN.findall(tb)
            if len(wa) + len(wb) > MAX_WORDS:
                out += [("del", ta), ("ins", tb)]
                continue
            for op2, k1, k2, m1, m2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
                if op2 == "equal":
                    out.append(("same", "".join(wa[k1:k2])))
                else:
                    out += [("del", "".join(wa[k1:k2])), ("ins", "".join(wb[m1:m2]))]
    return _merge(out)


def diff_view(a: str, b: str) -> list[dict]:
    """:func:`word_diff` as the template shows it: a long unchanged stretch folded to its head and tail."""
    out = []
    for op, text in word_diff(a, b):
        if op == "same" and len(text) > FOLD:
            out.append({"op": op, "text": text[:FOLD_KEEP], "folded": text[FOLD_KEEP:-FOLD_KEEP],
                        "tail": text[-FOLD_KEEP:]})
        else:
            out.append({"op": op, "text": text, "folded": "", "tail": ""})
    return out


def request_text(c: dict) -> str:
    """A call's request as one text: each message under its role, then the sampling and the constraint."""
    parts = [f"[{m['role']}]\n{m['full']}" for m in c["head"] + c["middle"] + c["tail"]]
    if c["sampling"]:
        parts.append(f"[sampling] {c['sampling']}")
    if c["constraint"]:
        parts.append(f"[constraint] {c['constraint']}")
    return "\n".join(parts)


def call_diffs(ca: list[dict], cb: list[dict]) -> list[dict]:
    """Per call of either side (matched by stage, index and role): whether its output and request differ, and
    their diffs where they do (a call on one side only: named, no diff)."""
    key = lambda c: (c["stage"], c["index"], c["role"])  # noqa: E731
    by_b = {key(c): c for c in cb}
    seen, out = set(), []
    for c in ca + [c for c in cb if key(c) not in {key(x) for x in ca}]:
        k = key(c)
        if k in seen:
            continue
        seen.add(k)
        a = next((x for x in ca if key(x) == k), None)
        b = by_b.get(k)
        d = {"stage": k[0], "index": k[1], "role": k[2], "only": "A" if b is None else "B" if a is None else None,
             "output": None, "request": None, "same_output": False, "same_request": False}
        if a is not None and b is not None:
            oa = a["output"]["full"] if a["output"] else (a["error"] or "")
            ob = b["output"]["full"] if b["output"] else (b["error"] or "")
            d["same_output"] = oa == ob
            if oa != ob:
                d["output"] = diff_view(oa, ob)
            if a["request"] and b["request"]:
                qa, qb = request_text(a), request_text(b)
                d["same_request"] = qa == qb
                if qa != qb:
                    d["request"] = diff_view(qa, qb)
        out.append(d)
    return out
