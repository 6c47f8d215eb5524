"""Any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, a hosted API, or ``llmrec serve``).

The API key is read from the environment variable *named* in the config and is never logged.
Constraints travel as vLLM's ``structured_outputs`` (``constraint_style: vllm``), as OpenAI's
``response_format`` JSON schema (``openai``; closed choices become ``{"answer": enum}`` and the
answer is unwrapped), as ``response_format: json_object`` (``json_object``: JSON, schema not
enforced), or not at all (``none``: the prompt must ask for the format). The default, ``auto``,
starts with ``vllm`` and, when the server answers a 400 naming the field as unknown, moves to the
next format in that order, once for the whole run: logged as a warning and reported by ``run_facts()``
(``constraint_sent``), which the runner records with the run.

Rate limits: a 429 comes back as that request's failure carrying the reply's ``Retry-After``
(seconds or an HTTP date, at most ``rate_limit_wait_s``) as ``retry_after_s``; the caller's retry
policy (``serving/retry.py``) waits at least that long before the next of its ``retries + 1``
attempts, so a rate-limited server sees no more. Meanwhile every request of the engine pauses
until then, and the number of requests in flight is halved (at least 1); each success raises it
again by 1/limit up to ``max_concurrency`` (AIMD).

Token counts come from the reply's ``usage`` (``prompt_tokens_details.cached_tokens`` gives the
prefix-cache hits). ``count_tokens`` asks the server's ``/tokenize`` (vLLM serves it next to
``/v1``); where the server has none it estimates 4 characters per token and logs that once.
A failed request comes back as ``finish_reason="error"`` and a 400 naming the context length
as ``"over_context"``, per request: the other answers of the batch are kept, and the caller
retries only the failed ones.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field

from llmrec.errors import ConfigError, ContextOverflow, EngineError
from llmrec.redact import redact_url
from llmrec.settings import read_secret
from llmrec.serving.engine import EngineBase, EngineConfig, config_identity, path_tail, register_engine
from llmrec.types import Request, Result

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
_CONTEXT_WORDS = re.compile(r"context length|context window|maximum context|context_length_exceeded|too long",
                            re.IGNORECASE)
# how ``auto`` walks the constraint formats; the request fields whose rejection moves it on
STYLE_ORDER = ("vllm", "openai", "json_object", "none")
_STYLE_FIELDS = {"vllm": ("structured_outputs",), "openai": ("response_format", "json_schema"),
                 "json_object": ("response_format", "json_object")}
_UNKNOWN_WORDS = re.compile(r"unrecogni[sz]ed|unknown|unsupported|not supported|not permitted|not allowed|"
                            r"unexpected|extra (?:inputs|fields)", re.IGNORECASE)


class OpenAIEngineConfig(EngineConfig):
    not_in_identity: ClassVar[dict[str, str]] = {
        "base_url": "in the identity without its credentials (another server is another engine)",
        "api_key_env": "names the variable holding the key; the key is a credential, not a setting of the model",
        "timeout_s": "how long one attempt may take; an attempt cut short fails and is never cached",
        "max_concurrency": "how many requests are in flight, not what they answer",
        "rate_limit_wait_s": "how long a rate-limited request waits, not what it answers",
    }

    type: Literal["openai"] = "openai"
    base_url: str = Field("http://127.0.0.1:8000/v1", description="API root, ending in /v1")
    model: str = Field(description="model name sent with every request (identifies the answers)")
    api_key_env: str | None = Field(None, description="NAME of the environment variable holding the API key")
    timeout_s: float = Field(120.0, gt=0, description="per-request HTTP timeout")
    max_concurrency: int = Field(8, ge=1, description="requests sent in parallel (lowered while a server answers 429)")
    constraint_style: Literal["auto", "vllm", "openai", "json_object", "none"] = Field(
        "auto", description="how constraints are sent: vLLM structured_outputs, OpenAI response_format JSON schema, "
                            "response_format json_object, or not at all; auto: the first of these the server accepts")
    rate_limit_wait_s: float = Field(600.0, ge=0, description="longest HTTP 429 Retry-After honoured before the next "
                                                              "attempt (a longer one is cut to this)")

    @property
    def label(self) -> str:
        return path_tail(self.model)


def split_base_url(base_url: str) -> tuple[str, list[tuple[str, str]]]:
    """``base_url`` as the root requests' paths are joined to (no query, no trailing ``/``) and its query
    parameters, sent with every request: ``…/v1?api-version=1`` + ``/chat/completions`` is
    ``…/v1/chat/completions?api-version=1``, never ``…/v1?api-version=1/chat/completions``."""
    parts = urlsplit(base_url)
    root = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return root, parse_qsl(parts.query, keep_blank_values=True)


def retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class RateLimited(EngineError):
    """HTTP 429; ``retry_after_s``: the server's Retry-After (None: it gave none)."""

    def __init__(self, message: str, retry_after_s: float | None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Concurrency:
    """Requests in flight, limited AIMD-style: halved on a 429 (once per wait), +1/limit per success.

    A 429 also pauses every new request until its wait is over (the server asked all of them to wait)."""

    def __init__(self, ceiling: int):
        self.ceiling, self.limit = ceiling, float(ceiling)
        self.in_flight = 0
        self._resume_at = 0.0  # monotonic time before which nothing is sent
        self._cv = threading.Condition()

    def acquire(self) -> None:
        with self._cv:
            while True:
                pause = self._resume_at - time.monotonic()
                if pause <= 0 and self.in_flight < int(self.limit):
                    self.in_flight += 1
                    return
                self._cv.wait(timeout=pause if pause > 0 else None)

    def release(self, ok: bool) -> None:
        with self._cv:
            self.in_flight -= 1
            if ok:
                self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            self._cv.notify_all()

    def throttled(self, wait_s: float) -> None:
        """A 429: halve the limit unless a wait already in force covers this one, and pause new requests until
        it is over (a gate for the other requests; the failed one's retry is the caller's)."""
        with self._cv:
            now = time.monotonic()
            if now >= self._resume_at:
                self.limit = max(1.0, self.limit / 2)
            self._resume_at = max(self._resume_at, now + wait_s)


@register_engine("openai", OpenAIEngineConfig)
class OpenAIEngine(EngineBase):
    thread_safe = True  # one httpx.Client shared by threads
    remote = True  # a client of a server elsewhere: runs inside its caller, never in an engine pool

    def __init__(self, config: OpenAIEngineConfig):
        self.config = config
        self._client = None
        self._tokenize_ok: bool | None = None
        self._style = "vllm" if config.constraint_style == "auto" else config.constraint_style  # what is sent
        self._style_lock = threading.Lock()
        self.concurrency = Concurrency(config.max_concurrency)

    def start(self) -> None:
        if self._client is not None:
            return
        import httpx

        headers = {"Content-Type": "application/json"}
        if self.config.api_key_env:
            key = read_secret(self.config.api_key_env)
            if not key:
                raise ConfigError(f"engine.api_key_env: the environment variable {self.config.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        self._httpx = httpx
        root, query = split_base_url(self.config.base_url)
        # the query (e.g. an API version, or a gateway's credential) goes with every request, after the path
        self._client = httpx.Client(base_url=root, params=query, headers=headers, timeout=self.config.timeout_s)

    def url(self, path: str = "") -> str:
        """The URL a request to ``path`` (``/chat/completions``) goes to, as shown in messages and logs: the
        path joined before ``base_url``'s query, and the query's values redacted (``llmrec.redact``)."""
        root, query = split_base_url(self.config.base_url)
        return redact_url(root + path + (f"?{urlencode(query)}" if query else ""))

    def identity(self) -> dict:
        # the server is part of the engine: another server serving the same model name is another engine, so it
        # never answers from this one's cache entries (its credentials are not part of the key). What the server
        # runs (its context size, dtype) is not known here: a server restarted with other settings at the same
        # URL and model name is the same engine to this key
        return config_identity(self.config, base_url=redact_url(self.config.base_url.rstrip("/")))

    def run_facts(self) -> dict:
        if self.config.constraint_style == "auto" and self._style != STYLE_ORDER[0]:
            return {"constraint_sent": self._style}  # the server rejected the formats before it
        return {}

    # -- requests -------------------------------------------------------------------------------
    def body(self, request: Request, style: str | None = None) -> dict:
        s, c = request.sampling, request.constraint
        body = {"model": self.config.model, "messages": [m.model_dump() for m in request.messages],
                "temperature": s.temperature, "max_tokens": s.max_tokens, "top_p": s.top_p}
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        style = style or self._style
        if c is None or style == "none":
            return body
        if style == "vllm":
            body["structured_outputs"] = {"choice": c.choices} if c.choices is not None else {"json": c.json_schema}
            return body
        if style == "json_object":
            body["response_format"] = {"type": "json_object"}
            return body
        schema = c.json_schema if c.json_schema is not None else {
            "type": "object", "properties": {"answer": {"type": "string", "enum": c.choices}},
            "required": ["answer"], "additionalProperties": False}
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "output", "schema": schema, "strict": True}}
        return body

    def _post(self, path: str, body: dict):
        try:
            return self._client.post(path, json=body)
        except self._httpx.HTTPError as e:
            raise EngineError(f"{self.url(path)}: {type(e).__name__}: {e}") from e

    def _fall_back(self, rejected: str, text: str) -> bool:
        """The server rejected ``rejected``'s field: move ``auto`` to the next format (once for all
        threads). False when there is none to move to (a fixed style, or already ``none``)."""
        with self._style_lock:
            if self._style != rejected:
                return True  # another request already moved on
            if self.config.constraint_style != "auto" or rejected == STYLE_ORDER[-1]:
                return False
            self._style = STYLE_ORDER[STYLE_ORDER.index(rejected) + 1]
        log.warning("%s rejected %s constraints (%s); sending them as %s for the rest of the run "
                    "(constraint_style: auto)", self.url(), rejected, " ".join(text.split())[:200],
                    self._style)
        return True

    def _rejects(self, request: Request, style: str, status: int, text: str) -> bool:
        return (request.constraint is not None and status in (400, 422) and style in _STYLE_FIELDS
                and any(f in text for f in _STYLE_FIELDS[style]) and bool(_UNKNOWN_WORDS.search(text)))

    def _send(self, request: Request) -> tuple[object, str]:
        """POST until the reply is not a rejected constraint format (one attempt of the request: a 429 is
        returned, for the caller's retry policy); (reply, style sent)."""
        while True:
            style = self._style
            self.concurrency.acquire()
            reply = None
            try:
                reply = self._post("/chat/completions", self.body(request, style))
            finally:
                self.concurrency.release(ok=reply is not None and reply.status_code == 200)
            if self._rejects(request, style, reply.status_code, reply.text) and self._fall_back(style, reply.text):
                continue
            return reply, style

    def _rate_limited(self, reply) -> RateLimited:
        """A 429: pause this engine's requests for the server's ``Retry-After`` (halving how many go at once)."""
        wait = retry_after_s(reply.headers.get("Retry-After"))
        wait = None if wait is None else min(wait, self.config.rate_limit_wait_s)
        self.concurrency.throttled(wait or 0.0)
        log.info("%s: HTTP 429 (Retry-After %s; concurrency now %d)", self.url(),
                 "none" if wait is None else f"{wait:.1f} s", int(self.concurrency.limit))
        return RateLimited(f"{self.url('/chat/completions')}: HTTP 429: {reply.text[:300]}", wait)

    def _one(self, request: Request) -> Result:
        reply, style = self._send(request)
        if reply.status_code == 429:
            raise self._rate_limited(reply)
        if reply.status_code != 200:
            text = reply.text[:500]
            if reply.status_code == 400 and _CONTEXT_WORDS.search(text):
                raise ContextOverflow.from_server_text(text, estimate_tokens(request))
            raise EngineError(f"{self.url('/chat/completions')}: HTTP {reply.status_code}: {text}")
        where = self.url("/chat/completions")
        try:
            data = reply.json()
            choice = data["choices"][0]
            text = choice["message"]["content"]
            if text is None:  # no answer at all (e.g. a refusal, a tool call, a filtered reply): a failed call
                why = choice["message"].get("refusal") or f"finish_reason {choice.get('finish_reason')!r}"
                raise EngineError(f"{where}: the server's reply has no text (message.content is null; "
                                  f"{' '.join(str(why).split())[:200]})")
            if not isinstance(text, str):
                raise TypeError(f"message.content is {type(text).__name__}, not text")
            usage = data.get("usage") or {}
            details = usage.get("prompt_tokens_details") or {}
            counts = {name: _count(src, key) for name, src, key in (
                ("prompt_tokens", usage, "usage.prompt_tokens"),
                ("completion_tokens", usage, "usage.completion_tokens"),
                ("cached_prompt_tokens", details, "usage.prompt_tokens_details.cached_tokens"))}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise EngineError(f"{where}: the server's reply is malformed: {e}: {reply.text[:300]}") from e
        c = request.constraint
        if c is not None and c.choices is not None and style in ("openai", "json_object"):
            text = _unwrap_answer(text)
        return Result(text=text, **counts,
                      finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
                      latency_s=reply.elapsed.total_seconds(), request_id=request.request_id)

    def _one_result(self, request: Request) -> Result:
        """One request's result; its failure is its own (the batch's other answers are kept)."""
        try:
            return self._one(request)
        except ContextOverflow as e:
            return Result.over_context(request, e)
        except RateLimited as e:
            return Result.failure(request, str(e), e.retry_after_s)
        except EngineError as e:
            return Result.failure(request, str(e))

    def generate(self, requests: list[Request]) -> list[Result]:
        self.start()
        if len(requests) <= 1 or self.config.max_concurrency == 1:
            return [self._one_result(r) for r in requests]
        with ThreadPoolExecutor(min(self.config.max_concurrency, len(requests))) as pool:
            return list(pool.map(self._one_result, requests))

    # -- tokens ---------------------------------------------------------------------------------
    def _tokenize_url(self) -> str:
        root = str(self._client.base_url).rstrip("/")
        return root[: -len("/v1")] + "/tokenize" if root.endswith("/v1") else root + "/tokenize"

    def count_tokens(self, request: Request) -> int:
        self.start()
        if self._tokenize_ok is not False:
            url = self._tokenize_url()
            body = {"model": self.config.model, "messages": [m.model_dump() for m in request.messages],
                    "add_generation_prompt": True}
            try:
                reply = self._client.post(url, json=body)
            except self._httpx.HTTPError as e:
                raise EngineError(f"{url}: {type(e).__name__}: {e}") from e
            if reply.status_code == 200:
                try:
                    count = int(reply.json()["count"])
                except (ValueError, KeyError, TypeError) as e:
                    raise EngineError(f"malformed reply from {url}: {reply.text[:300]}") from e
                self._tokenize_ok = True
                return count
            if reply.status_code not in (404, 405) or self._tokenize_ok:
                raise EngineError(f"{url}: HTTP {reply.status_code}: {reply.text[:300]}")
            self._tokenize_ok = False
            log.info("%s has no /tokenize; token counts are estimated at %d characters per token",
                     self.url(), CHARS_PER_TOKEN)
        return estimate_tokens(request)

    def check_health(self) -> bool:
        self.start()
        try:
            return self._client.get("/models").status_code == 200
        except self._httpx.HTTPError:
            return False

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _count(src: dict, key: str) -> int:
    """The token count ``key`` (its dotted path in the reply) of a reply's ``usage``: absent or null is 0;
    anything but a whole number >= 0 is malformed."""
    value = src.get(key.rsplit(".", 1)[-1])
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
            or value != int(value):
        raise ValueError(f"{key} is {value!r}, not a token count")
    return int(value)


def estimate_tokens(request: Request) -> int:
    chars = sum(len(m.content) for m in request.messages)
    return -(-chars // CHARS_PER_TOKEN) + 4 * len(request.messages)


def _unwrap_answer(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text  # model output is data: keep it as is for the parser
    return value["answer"] if isinstance(value, dict) and isinstance(value.get("answer"), str) else text
