"""Configured secrets out of everything llmrec records: resolved configs, MLflow params and tags, error texts, logs.

A URL keeps its scheme, host and path; its user info (``http://user:pass@host``) and the value of
every query or fragment parameter become ``REDACTED``, except the parameters known to be harmless
(:data:`HARMLESS_PARAMS`: ``api-version``, an S3 ``region``, ...): a server may take a credential under
any name (``?auth=``, ``?apitoken=``, ``?sas=``). Config keys are judged by their words (``is_secret_name``).

Only what comes from configuration or from an engine's error is redacted (the config a run records, its
params, the error text of a failed call): what a model said is stored as it said it, URLs included. The
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
# query parameters whose values are kept: settings that hold no credential (an API version, an object store's
# region or endpoint, a database driver's connection options)
HARMLESS_PARAMS = frozenset({"api-version", "api_version", "region", "endpoint_override", "scheme",
                             "retry_limit_seconds", "connect_timeout", "request_timeout", "sslmode",
                             "allow_bucket_creation", "allow_bucket_deletion", "force_virtual_addressing",
                             "anonymous", "charset", "application_name"})
# a URL inside text: up to whitespace or a quote, not counting the punctuation that ends a sentence or a label
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;!?)\]]")


def is_secret_name(name: str) -> bool:
    words = re.split(r"[_\-.]", str(name).lower())
    return words[-1] != "env" and not SECRET_WORDS.isdisjoint(words)


def _params(text: str) -> str:
    out = []
    for pair in text.split("&"):
        name, eq, value = pair.partition("=")
        out.append(f"{name}={REDACTED}" if eq and value and name.lower() not in HARMLESS_PARAMS else pair)
    return "&".join(out)


def redact_url(url: str) -> str:
    """``url`` without user info and without the values of its query and fragment parameters (but harmless ones)."""
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


def redacted_errors(value: Any) -> Any:
    """A copy of plain data whose ``error`` texts (at any depth) are redacted and nothing else: a stored
    record keeps its sample and the model's outputs verbatim; an engine's or a stage's error, which may quote
    the configured URL it failed on, loses the URL's credentials."""
    if isinstance(value, dict):
        return {k: redact_text(v) if k == "error" and isinstance(v, str) else redacted_errors(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redacted_errors(v) for v in value)
    return value
