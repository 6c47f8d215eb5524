"""Stable seeds: identical in every process, run and Ray worker (never Python's ``hash``)."""

from __future__ import annotations

import hashlib
import random


def stable_seed(*parts: object) -> int:
    blob = "\x1f".join(repr(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big") & 0x7FFFFFFF


def stable_rng(*parts: object) -> random.Random:
    return random.Random(stable_seed(*parts))
