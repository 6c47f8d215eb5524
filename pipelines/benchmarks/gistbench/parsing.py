"""Model text → parsed answers. Bad output is data: ``None`` means "unparsable", never an exception.

Extraction has two parsers (``extraction.parsing``). ``reference`` (default) is the
reference's: a fenced block or the first bracketed span, ``json.loads``, and only a list of
objects with string ids counts. ``lenient`` recovers JSON in the paper's order (§5): plain
parsing, then the JSON embedded in free text (a fenced block, else the outermost brackets),
then ``json_repair`` for structural errors (unclosed brackets, trailing commas).
"""

from __future__ import annotations

import json
import re

import json_repair

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_NONE = re.compile(r"(?<![A-Za-z])NONE(?![A-Za-z])", re.I)  # not inside an English word
_ID_BRACKETS = re.compile(r"^\[\s*(.*?)\s*\]$")


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _embedded(text: str) -> str | None:
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = text.rfind("]" if text[start] == "[" else "}")
    return text[start: end + 1] if end > start else text[start:]


def extract_json(text: str):
    """The JSON value in ``text`` (list or dict), or None when nothing usable is found."""
    text = (text or "").strip()
    fence = _FENCE.search(text)
    candidates = [fence.group(1).strip()] if fence else []
    candidates += [text, _embedded(text)]
    for cand in candidates:
        if cand:
            value = _loads(cand)
            if isinstance(value, (list, dict)):
                return value
    for cand in candidates[:1] + [_embedded(text)]:
        if cand:
            value = json_repair.loads(cand)
            if isinstance(value, (list, dict)) and value:
                return value
    return None


def _clean_name(value) -> str:
    """Whitespace-normalized name; "" for placeholders without a letter or digit (e.g. an echoed "...")."""
    name = " ".join(str(value).split()) if value is not None else ""
    return name if any(ch.isalnum() for ch in name) else ""


def _clean_ids(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        value = re.split(r"[,\s]+", str(value))
    out = []
    for v in value if isinstance(value, list) else []:
        if isinstance(v, (dict, list)):
            continue
        s = str(v).strip()
        m = _ID_BRACKETS.match(s)  # "[12]" copied from the history lines
        s = m.group(1) if m else s
        if s and s not in out:
            out.append(s)
    return out


def interests_from_json(value) -> list[dict] | None:
    """``[{"interest", "item_ids", ...}]`` (also ``{"interests": [...]}`` or one object) → clean list.

    ``[]`` is a valid answer (no interest); a non-empty list without one usable interest object
    (e.g. ``[204]`` recovered from an echoed history line) is not.
    """
    if isinstance(value, dict):
        value = value.get("interests", [value] if "interest" in value else None)
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, dict):
            continue
        name = _clean_name(item.get("interest"))
        if name:
            out.append({"interest": name, "item_ids": _clean_ids(item.get("item_ids"))})
    return out if out or not value else None


_REF_FENCE = re.compile(r"```(?:json)?\s*([\s\S]*?)```")
_REF_OUTER = re.compile(r"(\[[\s\S]*\]|\{[\s\S]*\})")


def extract_json_reference(text: str):
    """The reference's recovery: the first fenced block if any, then the first greedy ``[...]``
    or ``{...}`` span, then plain ``json.loads``; anything else is None (no repair)."""
    text = text or ""
    fence = _REF_FENCE.search(text)
    if fence:
        text = fence.group(1)
    outer = _REF_OUTER.search(text)
    return _loads(outer.group(1) if outer else text)


def interests_reference(value) -> list[dict]:
    """The reference's reading of parsed JSON: only a list yields interests (a ``{"interests": [...]}``
    wrapper or a bare object gives none); each dict item keeps its name verbatim; only string ids
    survive (the reference matches ids against string object ids, so integer ids cite nothing)."""
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("interest", ""), str):
            continue
        ids = item.get("item_ids", [])
        ids = [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
        out.append({"interest": item.get("interest", ""), "item_ids": list(dict.fromkeys(ids))})
    return out


def parse_extraction(text: str, mode: str = "reference") -> list[dict] | None:
    """Interests of one chunk, or None when the reply is unparsable (a failed chunk).

    ``reference`` (default) loses what the reference loses; ``lenient`` repairs JSON
    (``json_repair``), unwraps ``{"interests": [...]}`` and bare objects, and normalizes ids."""
    if mode == "reference":
        value = extract_json_reference(text)
        return None if value is None else interests_reference(value)
    return interests_from_json(extract_json(text))


def merge_interests(per_chunk: list[list[dict]]) -> list[dict]:
    """Merge by exact (whitespace-normalized) name across chunks; cited ids are unioned in order."""
    merged: dict[str, list[str]] = {}
    for chunk in per_chunk:
        for item in chunk:
            ids = merged.setdefault(item["interest"], [])
            ids.extend(i for i in item["item_ids"] if i not in ids)
    return [{"interest": name, "item_ids": ids} for name, ids in merged.items()]


def parse_indices(text: str, n: int) -> list[int] | None:
    """Judge index list: "NONE" anywhere → []; else the valid indices in order; nothing valid → None."""
    text = text or ""
    if _NONE.search(text):
        return []
    out: list[int] = []
    for m in re.findall(r"\d+", text):
        i = int(m)
        if i < n and i not in out:
            out.append(i)
    return out or None


def parse_selection(text: str, n: int) -> list[int] | None:
    """IS judge picks ``item_<i>``; the valid indices in order, or None when there are none."""
    out: list[int] = []
    for m in re.findall(r"item[_\s]*(\d+)", (text or "").lower()):
        i = int(m)
        if i < n and i not in out:
            out.append(i)
    return out or None


def parse_taxonomy(text: str, n: int, valid: set[int]) -> dict[int, int]:
    """Lines ``<interest_number>: <category_number>`` → {0-based position: category}; invalid lines skipped."""
    out: dict[int, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"\s*(\d+)\s*:\s*(\d+)", line)
        if m:
            pos, cat = int(m.group(1)) - 1, int(m.group(2))
            if 0 <= pos < n and cat in valid and pos not in out:
                out[pos] = cat
    return out
