"""Answer → option label, by a regex search for a valid choice (paper A.7); None = missed.

Order of the search (first that succeeds wins):
1. the whole answer is a label, optionally bracketed/punctuated (``3``, ``(B)``, ``B.``);
2. the LAST ``answer is X`` / ``Answer: X`` (chain-of-thought answers end there);
3. a label at the very start (``B) Drama`` / ``4. Heat (1995)``);
4. exactly one distinct label standing alone in the text;
5. exactly one option's text quoted in the answer (case-insensitive).
Letters are upper-case only (a lone ``a`` is an article); numbers are 1..10.
"""

from __future__ import annotations

import re

LETTERS = ("A", "B", "C", "D")
NUMBERS = tuple(str(k) for k in range(1, 11))


def labels_for(n_options: int) -> tuple[str, ...]:
    return NUMBERS[:n_options] if n_options > 4 else LETTERS[:n_options]


def _label_re(labels: tuple[str, ...]) -> str:
    return "(?:" + "|".join(sorted(map(re.escape, labels), key=len, reverse=True)) + ")"


def parse_choice(text: str | None, options: list[str]) -> str | None:
    if not text or not text.strip():
        return None
    labels = labels_for(len(options))
    lab = _label_re(labels)
    t = text.strip()
    m = re.fullmatch(rf"[\(\[]?\s*({lab})\s*[\)\]\.:]?", t)
    if m:
        return m.group(1)
    found = re.findall(rf"answer\s*(?:is|:)?\s*[:\-]?\s*\**\s*[\(\[]?\s*({lab})(?![\w])", t, flags=re.IGNORECASE)
    found = [f for f in found if f in labels]
    if found:
        return found[-1]
    m = re.match(rf"[\(\[]?\s*({lab})\s*[\)\]\.:](?:\s|$)", t)
    if m:
        return m.group(1)
    alone = set(re.findall(rf"(?<![\w'])({lab})(?![\w'])", t))
    if len(alone) == 1:
        return alone.pop()
    low = t.casefold()
    hits = [k for k, o in enumerate(options) if o and o.casefold() in low]
    if len(hits) == 1:
        return labels[hits[0]]
    return None
