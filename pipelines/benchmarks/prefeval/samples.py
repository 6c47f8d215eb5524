"""PrefEval samples: pair × form × turns × position × extra preferences × conflict × method.

A sample's conversation is a *layout*: an ordered list of blocks, kept compact so long
contexts are not copied into every Ray row:
  ``["pref"]``            the preference turns (explicit: statement + the model's live reply),
  ``["stmt", id]``        another explicit statement (extra or conflicting preference) + live reply,
  ``["inter", a, b]``     inter-turn pairs a..b-1 of the LMSYS chats (read from the data dir).
"""

from __future__ import annotations

import math
from pathlib import Path

from llmrec.errors import DataError
from llmrec.pipelines.common.seeding import stable_rng
from llmrec.pipelines.benchmarks.prefeval import data as pdata
from llmrec.pipelines.benchmarks.prefeval.config import TOPICS, PrefEvalConfig, position_fraction, position_label
from llmrec.pipelines.benchmarks.prefeval.prompts import preference_messages, shuffle_options


def _cut(n: int, frac: float) -> int:
    return int(math.floor(n * frac + 0.5))


def build_layout(n: int, pref_at: float = 0.0, extras: int = 0, conflict: bool = False) -> list[list]:
    """Blocks for N inter-turn pairs with the preference after round(pref_at·N) pairs, ``extras``
    statements after round(j·N/(extras+1)) pairs (j = 1..extras), and a conflicting statement first."""
    events = [(_cut(n, pref_at), 1, ["pref"])]
    if conflict:
        events.append((0, 0, ["stmt", "c"]))
    events += [(_cut(n, j / (extras + 1)), 2, ["stmt", f"x{j - 1}"]) for j in range(1, extras + 1)]
    out: list[list] = []
    at = 0
    for cut, _, block in sorted(events, key=lambda e: (e[0], e[1])):
        if cut > at:
            out.append(["inter", at, cut])
            at = cut
        out.append(block)
    if n > at:
        out.append(["inter", at, n])
    return out


def prefix_of(layout: list[list], topic: str, form: str, task_id: int, conflict: bool) -> tuple[str, int]:
    """(prefix_key, prefix_len). A layout opening with inter-turns shares the LMSYS chats with every
    such sample of the topic/form (key ``corpus/...``); otherwise the conversation opens with this
    pair's preference and all its settings share a growing prefix (key ``topic/form/id``).
    prefix_len = inter-turn pairs in the run that follows the shared opening (longest runs first)."""
    if layout and layout[0][0] == "inter":
        return f"corpus/{topic}/{form}", layout[0][2] - layout[0][1]
    key = f"{topic}/{form}/{task_id:04d}" + ("/c" if conflict else "")
    i = 0
    while i < len(layout) and layout[i][0] != "inter":
        i += 1
    return key, (layout[i][2] - layout[i][1]) if i < len(layout) else 0


def extra_statements(data_dir: Path, seed: int, topic: str, task_id: int, k: int) -> list[str]:
    """k explicit preferences from k other topics (one each), the same first k for every k."""
    if k == 0:
        return []
    rng = stable_rng(seed, "extra-preferences", topic, task_id)
    others = [t for t in TOPICS if t != topic]
    rng.shuffle(others)
    picks = []
    for t in others[:k]:
        recs = pdata.load_topic(data_dir, "explicit", t)
        picks.append(recs[rng.randrange(len(recs))]["preference"])
    return picks


def sample_id(topic: str, form: str, task_id: int, n: int, position: str, k: int, conflict: bool, method: str) -> str:
    sid = f"{topic}/{form}/{task_id:04d}/t{n:03d}"
    if position != "start":
        sid += f"/p{position}"
    if k:
        sid += f"/x{k}"
    if conflict:
        sid += "/c"
    return f"{sid}/{method}"


def _variants(cfg: PrefEvalConfig, has_conflict: bool):
    for n in cfg.turns:
        for pos in cfg.positions:
            for k in cfg.extra_preferences:
                for conflict in ([False, True] if has_conflict else [False]):
                    yield n, pos, k, conflict


def _pair_samples(cfg: PrefEvalConfig, data_dir: Path, topic: str, form: str, task_id: int, rec: dict,
                  mcq: dict | None, conflict_text: str | None) -> list[dict]:
    base = {"task": cfg.task, "topic": topic, "form": form, "task_id": task_id,
            "question": rec["question"], "preference": rec["preference"],
            "_preference": preference_messages(form, rec)}
    if mcq is not None:
        base["options"], base["gold"] = shuffle_options(mcq["classification_task_options"], cfg.seed, topic, task_id)
    extras_all = extra_statements(data_dir, cfg.seed, topic, task_id, max(cfg.extra_preferences))
    out = []
    for n, pos, k, conflict in _variants(cfg, conflict_text is not None):
        layout = build_layout(n, position_fraction(pos), k, conflict)
        statements = [[f"x{j}", t] for j, t in enumerate(extras_all[:k])] + ([["c", conflict_text]] if conflict else [])
        key, plen = prefix_of(layout, topic, form, task_id, conflict)
        label = position_label(pos)
        for method in cfg.methods:
            out.append({**base, "sample_id": sample_id(topic, form, task_id, n, label, k, conflict, method),
                        "turns": n, "method": method, "position": label, "extra_prefs": k, "conflict": conflict,
                        "prefix_key": key, "prefix_len": plen, "_layout": layout, "_statements": statements})
    return out


def _record(rec: dict, form: str, mcq: list | None, task_id: int) -> dict:
    """The pair's record. MCQ + explicit: the preference text of ``mcq_options/<topic>.json``, as the
    reference's MCQ script reads it (30 of the 1000 statements are worded differently from
    ``explicit_preference/``, e.g. "I absolutely refuse ..." vs "I refuse ...")."""
    if mcq is None or form != "explicit":
        return rec
    return {**rec, "preference": mcq[task_id]["preference"]}


def build_samples(cfg: PrefEvalConfig, data_dir: Path) -> list[dict]:
    data_dir = Path(data_dir).resolve()
    for n in cfg.turns:
        pdata.inter_turns(data_dir, n)  # fails early if the chats are missing or too short
    conflicts = pdata.load_conflicting(cfg.conflicting_preferences) if cfg.conflicting_preferences else {}
    out: list[dict] = []
    for topic in cfg.topics:
        mcq = pdata.load_topic(data_dir, "mcq", topic) if cfg.task == "mcq" else None
        for form in cfg.forms:
            recs = pdata.load_topic(data_dir, form, topic)
            if mcq is not None and len(recs) != len(mcq):
                raise DataError(f"prefeval {topic}: {form} has {len(recs)} records, mcq_options {len(mcq)}")
            for task_id in range(min(len(recs), cfg.per_topic or len(recs))):
                out += _pair_samples(cfg, data_dir, topic, form, task_id, _record(recs[task_id], form, mcq, task_id),
                                     mcq[task_id] if mcq is not None else None, conflicts.get((topic, task_id)))
    return out[: cfg.limit] if cfg.limit else out
