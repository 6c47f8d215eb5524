"""Answer parsing as the reference does it: the <choice> tag, then the first A-D inside it."""

from __future__ import annotations

import re
import warnings

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

_LETTER = re.compile("[ABCD]")


def parse_choice(text: str | None) -> str | None:
    """Letter inside the first ``<choice>`` tag; None when the tag is missing or not plain text."""
    if not text:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        tag = BeautifulSoup(text, "html.parser").find("choice")
    if tag is None or tag.string is None:
        return None
    m = _LETTER.search(tag.string)
    return m.group(0) if m else None
