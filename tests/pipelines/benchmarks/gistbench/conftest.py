"""Scripted engines for GISTBench tests: the engine boundary is faked, every stage is real."""

from __future__ import annotations

import re
from typing import Callable

import pytest

from llmrec.types import Request, Result


class ScriptedEngine:
    """Answers each request with ``respond(request)``; keeps every request it saw."""

    def __init__(self, respond: Callable[[Request], str]):
        self.respond = respond
        self.seen: list[Request] = []

    def generate(self, requests: list[Request]) -> list[Result]:
        self.seen.extend(requests)
        return [Result(text=self.respond(r), request_id=r.request_id) for r in requests]


def kind(request: Request) -> str:
    """Which GISTBench step a request belongs to (read from its system message)."""
    first = request.messages[0]
    if first.role == "user":
        return "extract"
    text = first.content
    if text.startswith("You check whether"):
        return "judge"
    if text.startswith("You compare topics"):
        return "overlap"
    if text.startswith("You are an expert in content analysis"):
        return "is"
    if text.startswith("You sort user interests"):
        return "taxonomy"
    raise AssertionError(f"unknown request: {text[:60]}")


def last_user(request: Request) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


def query(request: Request) -> str:
    """The question itself: the last user message naming an interest (not a retry note)."""
    return next(m.content for m in reversed(request.messages) if m.role == "user" and 'Interest: "' in m.content)


def interest_of(request: Request) -> str:
    return re.search(r'Interest: "(.*)"', query(request)).group(1)


def pick(request: Request, label: str, keywords: list[str]) -> list[int]:
    """Indices of the listed items (``Item 3: ...`` / ``item_3: ...``) whose text has a keyword."""
    out = []
    for m in re.finditer(rf"^{label}(\d+): (.*)$", query(request), re.M):
        if any(k in m.group(2) for k in keywords):
            out.append(int(m.group(1)))
    return out


@pytest.fixture
def scripted():
    return ScriptedEngine
