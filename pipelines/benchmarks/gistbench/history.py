"""User histories: numeric time sort, most recent first, cut into prompt-sized chunks.

The reference sorts ``interaction_time`` as read; from CSV that is a *string* sort
("9" > "10"). Here timestamps are numbers (``mappers.parse_timestamps``); rows without
a time keep their file order after the timed ones.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from llmrec.pipelines.common.seeding import stable_seed
from llmrec.pipelines.benchmarks.gistbench import schema as S

Engagement = dict[str, str]  # object_id, engagement_type, object_text


def select_users(user_ids: Iterable[str], limit: int | None, seed: int = 0) -> list[str]:
    """Up to ``limit`` users, ordered by a stable hash of the id (the paper's deterministic hashing)."""
    ranked = sorted(set(user_ids), key=lambda u: (stable_seed("gistbench/users", seed, u), u))
    return ranked if limit is None else ranked[:limit]


def sort_history(frame: pd.DataFrame) -> pd.DataFrame:
    """Per user, most recent first; ties and missing times keep the input order."""
    pos = np.arange(len(frame))
    ts = frame[S.TIMESTAMP].astype("float64")
    key = pd.DataFrame({"u": frame[S.USER_ID].to_numpy(), "missing": ts.isna().to_numpy(),
                        "neg_ts": (-ts.fillna(0.0)).to_numpy(), "pos": pos})
    order = key.sort_values(["u", "missing", "neg_ts", "pos"], kind="stable").index.to_numpy()
    return frame.iloc[order].reset_index(drop=True)


def user_histories(frame: pd.DataFrame, users: list[str], max_history: int | None = None) -> dict[str, list[Engagement]]:
    """``user → [engagement, ...]`` most recent first, cut to ``max_history``."""
    wanted = frame[frame[S.USER_ID].isin(set(users))]
    ordered = sort_history(wanted)
    out: dict[str, list[Engagement]] = {u: [] for u in users}
    cols = [S.USER_ID, S.OBJECT_ID, S.ENGAGEMENT_TYPE, S.OBJECT_TEXT]
    for user, oid, etype, text in ordered[cols].itertuples(index=False, name=None):
        if max_history is None or len(out[user]) < max_history:
            out[user].append({S.OBJECT_ID: str(oid), S.ENGAGEMENT_TYPE: str(etype), S.OBJECT_TEXT: str(text)})
    return out


def chunk_history(history: list[Engagement], size: int) -> list[list[Engagement]]:
    """Non-overlapping windows of ``size`` engagements, in order (most recent first)."""
    return [history[i: i + size] for i in range(0, len(history), size)]


def format_engagements(chunk: list[Engagement]) -> str:
    """One line per engagement: ``[object_id] engagement_type - object_text`` (the reference's format)."""
    return "\n".join(f"[{e[S.OBJECT_ID]}] {e[S.ENGAGEMENT_TYPE]} - {e[S.OBJECT_TEXT]}" for e in chunk)


def objects_of(history: list[Engagement]) -> dict[str, str]:
    """``object_id → object_text`` of a history (the first text seen per object)."""
    out: dict[str, str] = {}
    for e in history:
        out.setdefault(e[S.OBJECT_ID], e[S.OBJECT_TEXT])
    return out


def types_of(history: list[Engagement]) -> dict[str, list[str]]:
    """``object_id → engagement types`` the user gave it (an object can carry several)."""
    out: dict[str, list[str]] = {}
    for e in history:
        kinds = out.setdefault(e[S.OBJECT_ID], [])
        if e[S.ENGAGEMENT_TYPE] not in kinds:
            kinds.append(e[S.ENGAGEMENT_TYPE])
    return out
