"""The cluster guide's commands do what it says they do: a head it starts on 127.0.0.1 stays there.

Ray keeps ``--node-ip-address=127.0.0.1`` only with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``; without it a head
started as ``ray start --head --node-ip-address=127.0.0.1`` takes the machine's outward address and listens on every
interface. Every such command the README and docs/cluster.md show, and the head the cluster tests start, carry it."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0"


def _commands(text: str) -> list[str]:
    """The shell commands of the fenced blocks in ``text``, continuation lines joined."""
    out, block, inside = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if inside:
                out += [c.strip() for c in "\n".join(block).replace("\\\n", " ").splitlines() if c.strip()]
            block, inside = [], not inside
        elif inside:
            block.append(line)
    return out


@pytest.mark.parametrize("doc", ["README.md", "docs/cluster.md"])
def test_every_loopback_head_in_the_guide_stays_on_the_loopback(doc):
    heads = [c for c in _commands((REPO / doc).read_text()) if re.search(r"\bray start --head\b", c)
             and "--node-ip-address=127.0.0.1" in c]
    assert heads, f"{doc} shows no `ray start --head --node-ip-address=127.0.0.1`"
    for cmd in heads:
        assert cmd.startswith(LOOPBACK + " ") or f"export {LOOPBACK}" in (REPO / doc).read_text(), \
            f"{doc}: `{cmd[:80]}…` listens on every interface without {LOOPBACK}"


def test_the_test_head_is_started_as_the_guide_says():
    from tests.cluster.servers import LOOPBACK_HEAD_ENV

    assert LOOPBACK_HEAD_ENV == dict([LOOPBACK.split("=")])
