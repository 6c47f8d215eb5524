"""Answer text → list of titles → contract ids (0 = a title that matches no catalog item).

Parsing (reference ``llm_metrics.py:108-189``): the text must hold one ``[...]`` span (first
``[`` to last ``]``, the reference's greedy ``\\[[\\s\\S]*\\]``); it is read as a Python list
literal, else as JSON with single quotes normalised. Anything else is non-compliant (the
stage re-asks). Lists are cut or padded to ``list_len``.

Mapping (reference ``:86-97``): exact title; else case-insensitive with HTML entities
unescaped (our reading of the reference's regex search over the newline-joined catalog,
whose match must itself be a title); else, with ``title_match: fuzzy``, the best rapidfuzz
WRatio match above the threshold; else 0. Duplicate titles collapse to the highest id (the
reference's dict keyed by title keeps the last assignment).
"""

from __future__ import annotations

import ast
import html
import json
import re

from llmrec.pipelines.benchmarks.beyond_utility.dataset import UNTITLED

PAD = UNTITLED  # the reference pads short lists with 'N\A'


def parse_titles(text: str) -> list[str] | None:
    """The answer's list of titles, or None when it is not a list (non-compliant)."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return None
    span = text[start:end + 1]
    value = None
    try:
        value = ast.literal_eval(span)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            value = json.loads(re.sub(r"(?<=[\[,])\s*'|'\s*(?=[\],])", '"', span))
        except json.JSONDecodeError:
            return None
    if not isinstance(value, list) or not value:
        return None
    return [str(v).strip() for v in value]


def fit(titles: list[str], n: int) -> list[str]:
    """Cut to ``n`` or pad with the reference's ``'N\\A'``."""
    return (list(titles) + [PAD] * n)[:n]


def _norm(title: str) -> str:
    return html.unescape(title).casefold().strip()


class TitleIndex:
    """title → contract id over the whole catalog (not only the candidates, as the reference)."""

    def __init__(self, titles: dict[int, str], mode: str = "reference", threshold: float = 90.0,
                 padding: str = "zero"):
        self.exact: dict[str, int] = {}
        self.folded: dict[str, int] = {}
        for item in sorted(titles):
            t = titles[item]
            if t == UNTITLED and padding != "untitled_item":
                continue  # 'N\A' maps to an untitled item only under the reference's padding quirk
            self.exact[t] = item
            self.folded[_norm(t)] = item
        self.mode, self.threshold = mode, threshold
        self._choices = list(self.exact)

    def lookup(self, title: str) -> int:
        if title in self.exact:
            return self.exact[title]
        hit = self.folded.get(_norm(title))
        if hit is not None:
            return hit
        if self.mode == "fuzzy" and title and self._choices:
            from rapidfuzz import fuzz, process

            best = process.extractOne(title, self._choices, scorer=fuzz.WRatio, score_cutoff=self.threshold)
            if best is not None:
                return self.exact[best[0]]
        return 0

    def ids(self, titles: list[str]) -> list[int]:
        return [self.lookup(t) for t in titles]
