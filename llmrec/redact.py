"""Secrets out of everything llmrec records: resolved configs, MLflow params and tags, stored results, logs.

A URL keeps its scheme, host, path and harmless query parameters; its user info
(``http://user:pass@host``) and the values of secret-looking query or fragment parameters
(``?token=…``, ``api_key=``, ``sig=``, ``X-Amz-Signature=``) become ``REDACTED``. Config keys
are judged by the same words (``is_secret_name``). Only what is recorded is redacted: the
config an engine or a client connects with keeps its credentials.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "REDACTED"
# A name holds a secret when one of its words (split at `_`, `-`, `.`) is one of these: `api_key`,
# `X-Amz-Signature`, `hf_token`; not `max_tokens`; never a name ending in `_env` (it names a variable).
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential",
                          "credentials", "sig", "signature"})
# a URL inside text: up to whitespace or a quote, not counting the punctuation that ends a sentence or a label
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;!?)\]]")


def is_secret_name(name: str) -> bool:
    words = re.split(r"[_\-.]", str(name).lower())
    return words[-1] != "env" and not SECRET_WORDS.isdisjoint(words)


def _params(text: str) -> str:
    out = []
    for pair in text.split("&"):
        name, eq, value = pair.partition("=")
        out.append(f"{name}={REDACTED}" if eq and value and is_secret_name(name) else pair)
    return "&".join(out)


def redact_url(url: str) -> str:
    """``url`` without user info and without the values of secret-looking parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: keep nothing after the scheme
        return url.split("://", 1)[0] + "://" + REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    clean = (parts.scheme, netloc, parts.path, _params(parts.query), _params(parts.fragment))
    return url if clean == tuple(parts) else urlunsplit(clean)


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted (error messages, config values)."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def redacted(value: Any) -> Any:
    """A copy of plain data (dicts, lists, strings) with every URL in its strings redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redacted(v) for v in value)
    return value
