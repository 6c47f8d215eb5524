"""The generation-task judge: four binary checks, their parsing, and the error types.

Prompts are the reference's files (``error_type/*.txt``) filled by plain ``str.replace`` in the
reference's order; answers are read from ``<answer>`` / ``<preference>`` / ``<explanation>``
tags with BeautifulSoup (a missing tag reads as ""). Reference semantics (substring tests on the
lower-cased answer):

    ack  = "yes" in acknowledge          viol = "yes" in violate
    hall = ack and "yes" in hallucinate  unhelpful = "no" in helpful
    inconsistent_violation = ack ∧ ¬hall ∧ viol ∧ ¬unhelpful
    hallucinated_violation = ack ∧ hall ∧ viol ∧ ¬unhelpful
    unaware_violation      = ¬ack ∧ viol ∧ ¬unhelpful
    correct (accuracy)     = none of the above and ¬unhelpful  ≡  ¬viol ∧ ¬unhelpful

An empty or unparsable answer therefore passes (the run reports ``judge_failure_rate`` beside accuracy, and
``llmrec judges`` reads such an answer as ``unreadable``: ``check_outcomes``). In ``strict`` mode every answer the derivation
reads (hallucinate only when acknowledged) must be a clear yes/no — first word yes or no, the
other word absent — else the sample is ``judge_failed`` (counted, excluded from accuracy).
"""

from __future__ import annotations

import re
import warnings

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

from llmrec.pipelines.protocol import UNREADABLE

CHECKS = ("acknowledge", "violate", "hallucinate", "helpful")
ERROR_TYPES = ("unaware_violation", "hallucinated_violation", "inconsistent_violation", "unhelpful")
# placeholder replacement order per check, as the reference does it
FILL_ORDER = {
    "acknowledge": ("end_generation", "question"),
    "violate": ("preference", "question", "end_generation"),
    "helpful": ("preference", "question", "end_generation"),
    "hallucinate": ("preference", "assistant_restatement"),
}
_CLEAR = re.compile(r"\W*(yes|no)\b", re.IGNORECASE)


def fill_prompt(check: str, template: str, **values: str) -> str:
    """Plain sequential replacement, in the reference's order (a value that contains a later
    placeholder gets it replaced too, exactly as in the reference)."""
    out = template
    for key in FILL_ORDER[check]:
        out = out.replace("{" + key + "}", values.get(key, ""))
    return out


def parse_tag(text: str | None, tag: str) -> str:
    """Stripped text of the first ``<tag>``; "" when the tag is missing."""
    if not text:
        return ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        found = BeautifulSoup(text, "html.parser").find(tag)
    return found.text.strip() if found is not None else ""


def clear_answer(answer: str) -> bool | None:
    """True/False for a clear yes/no answer, None when empty, unparsable or ambiguous."""
    m = _CLEAR.match(answer or "")
    if m is None:
        return None
    word = m.group(1).lower()
    other = "no" if word == "yes" else "yes"
    if re.search(rf"\b{other}\b", answer, re.IGNORECASE):
        return None
    return word == "yes"


def _types(ack: bool, hall: bool, viol: bool, unhelpful: bool) -> dict:
    inconsistent = ack and not hall and viol and not unhelpful
    hallucinated = ack and hall and viol and not unhelpful
    unaware = not ack and viol and not unhelpful
    return {
        "acknowledged": ack, "hallucinated": hall, "violated": viol, "unhelpful": unhelpful,
        "inconsistent_violation": inconsistent, "hallucinated_violation": hallucinated,
        "unaware_violation": unaware,
        "correct": not (inconsistent or hallucinated or unaware or unhelpful),
    }


def check_outcomes(raw: dict[str, str | None]) -> dict[str, bool | str]:
    """Each check's answer as a judged decision: True / False for a clear yes / no (``clear_answer``), else
    ``UNREADABLE`` (an empty, missing or ambiguous answer is its own outcome, never the reference's default);
    hallucinate only when the preference was clearly acknowledged (unread otherwise, so absent here)."""
    clear = {c: clear_answer(parse_tag(raw.get(c), "answer")) for c in CHECKS}
    out: dict[str, bool | str] = {c: UNREADABLE if clear[c] is None else clear[c]
                                  for c in ("acknowledge", "violate", "helpful")}
    if clear["acknowledge"]:
        out["hallucinate"] = UNREADABLE if clear["hallucinate"] is None else clear["hallucinate"]
    return out


def derive(raw: dict[str, str | None], mode: str = "reference") -> dict:
    """Raw judge outputs (check → text) → per-sample flags, error types and ``correct``.

    ``judge_failed`` is computed in both modes (the strict criterion); only ``strict`` mode
    acts on it: flags then follow the clear answers and ``correct`` is None when it failed.
    """
    answers = {c: parse_tag(raw.get(c), "answer") for c in CHECKS}
    low = {c: a.lower() for c, a in answers.items()}
    ref_ack = "yes" in low["acknowledge"]
    ref = _types(ref_ack, ref_ack and "yes" in low["hallucinate"], "yes" in low["violate"], "no" in low["helpful"])
    clear = {c: clear_answer(a) for c, a in answers.items()}
    read = ["acknowledge", "violate", "helpful"] + (["hallucinate"] if clear["acknowledge"] else [])
    failed = any(clear[c] is None for c in read)
    out = {"judge_answers": answers, "extracted_preference": parse_tag(raw.get("acknowledge"), "preference"),
           "judge_failed": failed}
    if mode == "strict":
        if failed:
            return {**out, **{k: None for k in ref}}
        ack = bool(clear["acknowledge"])
        return {**out, **_types(ack, ack and bool(clear["hallucinate"]), bool(clear["violate"]),
                                not clear["helpful"])}
    return {**out, **ref}
