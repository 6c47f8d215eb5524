"""Reading an answer and matching it to the real title: the reference's fuzzy match, an exact match and a
normalised match.

- ``answer_text``: the reference removes every ``<id><sep>`` echo from the answer and strips it (``answer_cut``
  ``none``); ``line`` also keeps only the first non-empty line, cut at the next field separator.
- ``similarity``: rapidfuzz ``fuzz.ratio`` (0-100, Indel similarity) rounded to 2 decimals, as the reference
  computes it; memorized when above ``fuzzy_threshold`` (reference: > 80 for titles, >= 90 for user lines).
- ``exact``: the answer equals the title character for character (after the strip).
- ``normalised``: equal after ``normalise``: Unicode NFKC, case folded, a trailing article moved to the front
  (``Usual Suspects, The (1995)`` → ``the usual suspects (1995)``), punctuation dropped, spaces collapsed.
"""

from __future__ import annotations

import re
import unicodedata

from rapidfuzz import fuzz

_ARTICLE = re.compile(r"^(?P<body>.*?),\s*(?P<art>the|a|an|les|le|la|l'|il|die|der|das|el|los|las)"
                      r"(?P<tail>\s*\(.*\))?$", re.IGNORECASE)
_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


def answer_text(output: str | None, key: str, sep: str, cut: str = "none") -> str:
    text = (output or "").replace(f"{key}{sep}", "").strip()
    if cut == "line":
        lines = [x for x in text.splitlines() if x.strip()]
        text = lines[0].split(sep)[0].strip() if lines else ""
    return text


def similarity(answer: str, gold: str) -> float:
    return round(float(fuzz.ratio(answer, gold)), 2)


def normalise(title: str) -> str:
    t = unicodedata.normalize("NFKC", title).strip()
    m = _ARTICLE.match(t)
    if m:
        t = f"{m['art']} {m['body']}{m['tail'] or ''}"
    t = _PUNCT.sub(" ", t.casefold())
    return " ".join(t.split())


REFERENCE_RULE = {"item": (80.0, False), "user": (90.0, True), "interaction": (90.0, False)}
"""Per probe, the reference's (threshold, inclusive): items match above 80, user lines at 90 or more, interaction
rows above 90."""


def match(output: str | None, key: str, sep: str, gold: str, threshold: float | None = None,
          cut: str = "none", probe: str = "item") -> dict:
    """The scored fields of one answer: ``answer``, ``similarity``, ``correct`` (the reference's fuzzy match; a
    given ``threshold``: above it), ``exact``, ``normalised``. A user line is compared whole, as the reference does
    (its ID echo is part of the gold)."""
    whole = probe in ("user", "interaction")  # compared with the ID echo, as the reference does
    ans = (output or "").strip() if whole else answer_text(output, key, sep, cut)
    if whole and cut == "line":
        ans = next((x.strip() for x in ans.splitlines() if x.strip()), "")
    sim = similarity(ans, gold)
    limit, inclusive = REFERENCE_RULE[probe] if threshold is None else (threshold, False)
    return {"answer": ans, "similarity": sim, "correct": sim >= limit if inclusive else sim > limit,
            "exact": ans == gold.strip(), "normalised": bool(ans) and normalise(ans) == normalise(gold)}


_YEAR = re.compile(r"(?<!\d)(\d{4})(?!\d)")


def _genre_set(text: str) -> frozenset[str]:
    return frozenset(g.strip().casefold() for g in re.split(r"[|,;/]", text) if g.strip())


def match_attribute(output: str | None, key: str, sep: str, gold: str, probe: str, cut: str = "none") -> dict:
    """An attribute answer (the probes the reference does not have): year: ``correct`` when the first four-digit
    number of the answer is the year; genres: when the answer's genres (split at '|', ',', ';' or '/', case folded)
    are the gold's set, ``similarity`` their Jaccard index × 100. ``exact``: the answer is the gold as written;
    ``normalised`` = ``correct``."""
    ans = answer_text(output, key, sep, cut)
    if probe == "year":
        found = _YEAR.search(ans)
        ok = bool(found) and found.group(1) == gold
        sim = similarity(ans, gold)
    else:
        a, g = _genre_set(ans), _genre_set(gold)
        ok = bool(a) and a == g
        sim = round(100.0 * len(a & g) / len(a | g), 2) if a | g else 0.0
    return {"answer": ans, "similarity": sim, "correct": ok, "exact": ans == gold, "normalised": ok}
