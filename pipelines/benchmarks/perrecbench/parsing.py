"""Answer parsing as the reference does it (``utils.py``, ``exp0_few_shot_profile.py``).

- JSON answers: the LAST ``{...}`` span that holds no ``}`` (regex ``\\{[^}]*\\}``), then
  ``json.loads``.
- Point: the value of the last key containing ``rating`` or ``score`` (case-insensitive);
  it must be a number.
- List: ``check_format`` (key ``predicted_ranking``, ``len == n``, ``min == 1``,
  ``max == len``; duplicates pass, e.g. ``[1, 3, 3]``), then the value of the last key
  containing ``rank`` (case-sensitive).
- Pair: the first ``[...]`` span (greedy, as the reference's ``\\[[^}]*]``), else the whole
  stripped reply; valid when it is ``[User A]``, ``[User B]``, ``User A`` or ``User B``
  (any case). A pair counts as "A preferred" only when the two orders agree in the same
  form (bracketed or not).
- Self-consistency: the most common raw completion (first seen wins ties) is parsed.

Every parser returns ``None`` for an unusable answer (the caller retries, then records it
as missed); none raises. Deliberate departures, all for answers the reference would turn
into garbage or an endless loop: booleans, NaN and infinities are not numbers, and a list
answer must be whole numbers in 1..n (integral floats are converted to int).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

_BRACED = re.compile(r"\{[^}]*\}")
_BRACKETED = re.compile(r"\[[^}]*]")
PAIR_FORMS = ("[user a]", "[user b]", "user a", "user b")
MISSED = "format_not_correct"  # the reference's marker for an answer that never parsed


def majority_vote(texts: list[str]) -> str | None:
    return Counter(texts).most_common(1)[0][0] if texts else None


def extract_braced(text: str | None) -> str | None:
    """The last ``{...}`` substring without a nested ``}``, or None."""
    if not text:
        return None
    found = _BRACED.findall(text)
    return found[-1] if found else None


def load_json_object(text: str | None) -> dict | None:
    braced = extract_braced(text)
    if braced is None:
        return None
    try:
        obj = json.loads(braced)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _is_number(v: object) -> bool:
    """A finite JSON number (not a boolean)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


def parse_point(text: str | None) -> int | float | None:
    """Predicted rating (the number as written: ``4`` stays int, ``4.0`` float), or None."""
    obj = load_json_object(text)
    if obj is None:
        return None
    keys = [k for k in obj if "rating" in k.lower() or "score" in k.lower()]
    if not keys:
        return None
    value = obj[keys[-1]]
    return value if _is_number(value) else None


def check_format(obj: dict, n: int) -> bool:
    """The reference's ``check_format``: ``predicted_ranking`` of length n spanning 1..n."""
    ranking = obj.get("predicted_ranking")
    try:
        return len(ranking) == n and min(ranking) == 1 and max(ranking) == len(ranking)
    except (TypeError, ValueError):  # not a sized list, empty, or mixed types
        return False


def parse_list(text: str | None, n: int) -> list[int] | None:
    """Ordering list (1-based user indices, most preferred first), or None."""
    obj = load_json_object(text)
    if obj is None or not check_format(obj, n):
        return None
    keys = [k for k in obj if "rank" in k]
    value = obj[keys[-1]]
    if not isinstance(value, list) or not all(_is_number(v) and float(v).is_integer() and 1 <= v <= n for v in value):
        return None
    return [int(v) for v in value]


def parse_pair(text: str | None) -> str | None:
    """``"[user a]"``, ``"[user b]"``, ``"user a"`` or ``"user b"``, or None."""
    if text is None:
        return None
    found = _BRACKETED.findall(text)
    pick = (found[0] if found else text.strip()).lower()
    return pick if pick in PAIR_FORMS else None


def prefers_first(reply_ab: str | None, reply_ba: str | None) -> bool:
    """True when the user shown first (A) wins in both orders: the (A, B) prompt answered
    User A and the (B, A) prompt answered User B, in the same form."""
    return (reply_ab, reply_ba) in (("[user a]", "[user b]"), ("user a", "user b"))


def parse_reference_value(obj: dict, mode: str, n: int) -> object:
    """What the reference stores in its parsed file for one of its answer dicts (via the
    same text path: the dict as JSON text, then this module's parser)."""
    text = json.dumps(obj)
    value = parse_point(text) if mode == "point" else parse_list(text, n)
    return MISSED if value is None else value
