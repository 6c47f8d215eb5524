"""Transcripts: what every engine call of a sample was sent and answered, each distinct text stored once.

A sample's record keeps, per stage, every engine call's result (``outputs``: text, finish reason, tokens, latency).
Each such entry also holds a **request reference** (``entry["request"]``)::

    {"role": "subject" | "judge",              # which engine answered
     "messages": [{"role": "user", "text": KEY}, ...],   # the chat messages, each text by its key
     "prompt": [KEY, ...] | KEY | None,        # the prompt text after llmrec's own rendering (base models), if any:
                                               # the keys of its pieces (prompt_parts), or one key
     "sampling": {...}, "constraint": {...} | None,
     "seq": N}                                 # the call's position among the sample's calls (the runner sets it)

and the texts themselves live once per run directory in ``transcripts/`` (:class:`TextStore`): parquet shards of
``(key, text)`` rows, content-addressed by :func:`text_key`. PrefEval's samples of one pair share almost every
message of a 300-turn conversation, so a run stores each turn once however many samples (and calls) send it.

Writers: the engine-calling worker builds references with :func:`request_ref`, collecting the texts in a dict; the
driver hands each batch's texts to :meth:`TextStore.add`, which writes only keys not yet stored. Readers:
:func:`calls` lists a record's calls in order; :func:`resolve` fills their texts from the store and names any text
that is missing (a damaged or partial copy shows everything else).
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from llmrec.storage import Storage

log = logging.getLogger(__name__)

KEY_CHARS = 32  # hex characters of sha256 kept: 128 bits
SCHEMA = pa.schema([("key", pa.string()), ("text", pa.string())])
SHARD_PREFIX = "texts-"


def text_key(text: str) -> str:
    """The content address of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_CHARS]


def request_ref(request: Any, texts: dict[str, str], role: str = "subject", prompt: str | None = None) -> dict:
    """The reference stored with a call's result: ``request`` (a :class:`llmrec.types.Request`) with each message's
    text replaced by its key, which is added to ``texts`` (key → text). ``prompt``: the text the engine actually
    received after its own rendering, when it rendered one (base models without a chat template)."""
    msgs = []
    for m in request.messages:
        k = text_key(m.content)
        texts.setdefault(k, m.content)
        msgs.append({"role": m.role, "text": k})
    ref: dict[str, Any] = {"role": role, "messages": msgs,
                           "sampling": request.sampling.model_dump(mode="json"),
                           "constraint": request.constraint.model_dump(mode="json", exclude_none=True)
                           if request.constraint is not None else None}
    if prompt is not None:
        parts = prompt_parts(prompt, [m.content for m in request.messages])
        for part in parts:
            texts.setdefault(text_key(part), part)
        ref["prompt"] = [text_key(part) for part in parts]
    return ref


def prompt_parts(prompt: str, contents: list[str]) -> list[str]:
    """``prompt`` cut into pieces whose concatenation is ``prompt``: each message text found in it, in order, is a
    piece of its own (already stored as a message), and the text between them another (an engine's turn markers:
    short and the same in every prompt). So a rendered 300-turn prompt costs a list of keys, not a second copy of
    the conversation. A message text the prompt does not contain in order leaves the rest as one piece."""
    parts, pos = [], 0
    for content in contents:
        if not content:
            continue
        at = prompt.find(content, pos)
        if at < 0:
            break
        if at > pos:
            parts.append(prompt[pos:at])
        parts.append(content)
        pos = at + len(content)
    if pos < len(prompt):
        parts.append(prompt[pos:])
    return parts


class TextStore:
    """The content-addressed texts of one run directory (``RunDir.transcripts``)."""

    def __init__(self, root: Storage):
        self.root = root
        self._known: set[str] | None = None

    def shards(self) -> list[str]:
        return [n for n in self.root.list(".parquet") if n.startswith(SHARD_PREFIX)]

    def known(self) -> set[str]:
        """Keys already stored (read once from the shards' key columns, then kept up to date by :meth:`add`)."""
        if self._known is None:
            self._known = set()
            for shard in self.shards():
                table = self._read(shard, ["key"])
                if table is not None:
                    self._known.update(table.column("key").to_pylist())
        return self._known

    def add(self, texts: dict[str, str]) -> int:
        """Store the texts whose keys are not stored yet, as one write-once shard. Returns bytes written."""
        known = self.known()
        new = {k: t for k, t in texts.items() if k not in known}
        if not new:
            return 0
        buf = io.BytesIO()
        pq.write_table(pa.table({"key": list(new), "text": list(new.values())}, schema=SCHEMA), buf,
                       compression="zstd")
        data = buf.getvalue()
        self.root.write_bytes(f"{SHARD_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet", data)
        known.update(new)
        return len(data)

    def get(self, keys: Iterable[str]) -> dict[str, str]:
        """key → text for the wanted keys that are stored (a missing one is simply absent)."""
        want = set(keys)
        out: dict[str, str] = {}
        for shard in self.shards():
            if not want - out.keys():
                break
            table = self._read(shard, None)
            if table is None:
                continue
            for k, t in zip(table.column("key").to_pylist(), table.column("text").to_pylist()):
                if k in want:
                    out[k] = t
        return out

    def size_bytes(self) -> int:
        import pyarrow.fs as pafs

        infos = self.root.fs.get_file_info(pafs.FileSelector(self.root.path, allow_not_found=True))
        return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)

    def clear(self) -> None:
        for name in self.root.list():
            self.root.delete(name)
        self._known = set()

    def _read(self, shard: str, columns: list[str] | None) -> pa.Table | None:
        try:
            return pq.read_table(io.BytesIO(self.root.read_bytes(shard)), columns=columns)
        except Exception as e:  # noqa: BLE001 - a damaged shard: its texts show as missing, the rest still reads
            log.warning("transcript shard %s/%s is unreadable (%s): its texts show as missing", self.root, shard, e)
            return None


@dataclass
class Call:
    """One engine call of a sample, in the order the sample made them."""

    stage: str
    index: int  # position among the stage's calls (re-asks, judge rounds)
    role: str  # the engine: subject | judge | ... (None-safe: "subject" when the record predates roles)
    result: dict  # the stored Result fields: text, finish_reason, prompt_tokens, cached_prompt_tokens, ...
    request: dict | None  # the stored request reference (None: a record written before transcripts)
    messages: list[dict] = field(default_factory=list)  # [{"role", "content"}] once resolved
    prompt: str | None = None  # the engine-rendered prompt text, once resolved
    missing: list[str] = field(default_factory=list)  # keys whose text the store lacks


def calls(record: dict) -> list[Call]:
    """A record's engine calls in the order the sample made them (by the references' ``seq``; a record without
    it, e.g. written before transcripts: stage by stage in the order stored — the result store sorts its keys)."""
    out = []
    for stage, entry in (record.get("outputs") or {}).items():
        for i, e in enumerate(entry if isinstance(entry, list) else [entry]):
            if not isinstance(e, dict):
                continue
            req = e.get("request") if isinstance(e.get("request"), dict) else None
            result = {k: v for k, v in e.items() if k != "request"}
            out.append(Call(stage, i, (req or {}).get("role") or "subject", result, req))
    if out and all(c.request is not None and isinstance(c.request.get("seq"), int) for c in out):
        out.sort(key=lambda c: c.request["seq"])
    return out


def resolve(found: list[Call], store: TextStore) -> list[Call]:
    """Fill each call's messages and prompt from ``store``; a text the store lacks is named in ``missing`` and
    shown as a placeholder."""
    keys = {m["text"] for c in found if c.request for m in c.request.get("messages", [])}
    keys |= {k for c in found if c.request for k in _prompt_keys(c.request)}
    texts = store.get(keys) if keys else {}
    for c in found:
        if not c.request:
            continue
        c.messages, c.missing = [], []
        for m in c.request.get("messages", []):
            text = texts.get(m["text"])
            if text is None:
                c.missing.append(m["text"])
                text = f"[text {m['text']} is missing from the run's transcripts]"
            c.messages.append({"role": m["role"], "content": text})
        pieces = _prompt_keys(c.request)
        if pieces:
            lacking = [k for k in pieces if k not in texts]
            c.missing += lacking
            c.prompt = None if lacking else "".join(texts[k] for k in pieces)
    return found


def _prompt_keys(request: dict) -> list[str]:
    """The keys of a reference's rendered prompt: a list of pieces, or one key (references of older runs)."""
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    return [k for k in prompt if isinstance(k, str)] if isinstance(prompt, list) else []
