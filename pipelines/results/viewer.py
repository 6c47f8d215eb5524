"""`llmrec view`: the samples of run and suite directories, each with the transcript of every engine call.

:class:`Viewer` reads the run directories once (local or ``s3://``, through :class:`llmrec.rundir.RunDir`; a suite
through its ``suite.json``) and keeps every sample's row in memory with a small index (a pandas frame of the columns
the list filters by), so a page of a 10,000-sample run is a few boolean masks, not a file read. A sample's
transcript (the messages of each call) is read from the run's :class:`llmrec.transcripts.TextStore` when its page
is opened.

Reading results never imports code a run directory names: a benchmark is looked up in the installed registry
by its plain name; anything else (a ``pkg.mod:attr`` name, a name not installed) shows the samples without a
benchmark's explanation. :func:`app` is the Starlette web app (Jinja2 templates, autoescaped: samples hold user
text); :func:`print_sample` writes one sample's transcript to a terminal with Rich.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlencode

import jinja2
import numpy as np
import pandas as pd

from llmrec.errors import ConfigError
from llmrec.pipelines import capabilities as caps
from llmrec.pipelines.protocol import Benchmark, Explanation, failed_explanation, setting_label
from llmrec.pipelines.results.stored import StoredRun, installed_benchmark, open_runs
from llmrec.rundir import RunDir
from llmrec.transcripts import Call, TextStore, calls, resolve

log = logging.getLogger(__name__)

VERDICTS = ("right", "wrong", "missed", "failed")
FILTERS = ("benchmark", "subject", "entry", "setting", "verdict")
PAGE_SIZE = 50
SEP = "\x00"  # between rows' search texts
HEAD_MESSAGES = 3  # a long conversation shows its first and last messages; the middle stretch behind an expander
TAIL_MESSAGES = 4
LONG_TEXT = 4000  # a longer message shows its head; the whole text behind an expander
TEXT_HEAD = 1500
NO_TRANSCRIPTS = ("This run was written before llmrec stored transcripts: each call's output, tokens and timing "
                  "are shown, the messages it was sent are not. Run it again with --fresh to record them.")


def known_benchmark(name: str | None) -> Benchmark | None:
    """The installed benchmark of that plain name; None for anything else (never imports a named module)."""
    return installed_benchmark(name)


def run_notes(run: StoredRun, rows: list[dict]) -> list[str]:
    """What a run's page warns of: a benchmark that is not installed, no samples file, no transcripts."""
    notes = []
    if run.benchmark != "?" and run.bench is None:
        notes.append(f"benchmark {run.benchmark!r} is not an installed benchmark: its samples are shown without "
                     "verdicts (results never import code a run directory names)")
    if not run.has_samples():
        notes.append(f"no {RunDir.SAMPLES} in {run.dir.uri} (a run still going, or one that wrote no samples)")
    has_transcripts = bool(run.transcripts.shards()) or any(c.request for r in rows[:50] for c in calls(r))
    if rows and not has_transcripts:
        notes.append(NO_TRANSCRIPTS)
    return notes


def _samples_missing(run: StoredRun) -> str | None:
    """Why a run shows no samples although it has results: its ``samples.parquet`` is missing beside result shards
    (the viewer reads that file only; a run writes it when it ends). None when nothing is amiss."""
    if run.has_samples():
        return None
    shards = run.result_shards()
    held = f" although {RunDir.RESULTS}/ holds {shards} result shard(s)" if shards else ""
    return (f"{run.dir.uri} has no {RunDir.SAMPLES}{held} (a run writes it when it ends: re-run its config with "
            "`llmrec run` to resume and write it)")


def explain(view: StoredRun, row: dict) -> Explanation:
    """The benchmark's explanation of a row; without a benchmark (or when its explain fails) the default."""
    if view.bench is not None:
        try:
            got = caps.explain(view.bench, row)
            if got is not None:
                return got
        except Exception as e:  # noqa: BLE001 - one odd row must not lose the page: named in the reason
            failed = failed_explanation(row)
            return failed or Explanation(reason=f"explain failed: {type(e).__name__}: {e}")
        return failed_explanation(row) or Explanation()
    return caps.Explains().explain(row)


def _setting(view: StoredRun, row: dict) -> str:
    setting = row.get("setting")
    if isinstance(setting, dict):
        keys = list(caps.group_keys(view.bench)) if view.bench else []
        keys = [k for k in keys if k in setting] + [k for k in setting if k not in keys]
        return setting_label(keys, setting)
    return setting_label(caps.group_keys(view.bench), row) if view.bench else ""


def _search_text(row: dict, ex: Explanation) -> str:
    """What the list's text search looks in: the sample's stored fields (not its calls' request references), its
    calls' outputs and errors, and the explanation's words; case-folded."""
    parts = [ex.answer or "", ex.gold or "", ex.reason or ""]
    for k, v in row.items():
        if k == "outputs" or v is None:
            continue
        parts.append(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str))
    for c in calls(row):
        parts += [str(c.result.get("text") or ""), str(c.result.get("error") or "")]
    return " \n".join(parts).casefold()


class CachedStore(TextStore):
    """A run's text store read once, all of it, on the first page that needs a text (the viewer keeps it: pages
    of samples that share a conversation read nothing again). A store over ``limit_bytes`` is read per page."""

    def __init__(self, root, limit_bytes: int = 512 * 1024 * 1024):
        super().__init__(root)
        self.limit_bytes = limit_bytes
        self._texts: dict[str, str] | None = None

    def get(self, keys: Iterable[str]) -> dict[str, str]:
        if self._texts is None:
            if self.size_bytes() > self.limit_bytes:
                return super().get(keys)
            texts: dict[str, str] = {}
            for shard in self.shards():
                table = self._read(shard, None)
                if table is not None:
                    texts.update(zip(table.column("key").to_pylist(), table.column("text").to_pylist()))
            self._texts = texts
        return {k: self._texts[k] for k in keys if k in self._texts}


class Viewer:
    """The samples of some runs, loaded once, with the index the list pages filter."""

    def __init__(self, runs: list[StoredRun], sources: list[str]):
        self.runs, self.sources = runs, sources
        self.by_key = {r.key: r for r in runs}
        self.rows = {r.key: r.samples() or [] for r in runs}  # every sample, read once
        self.notes = {r.key: run_notes(r, self.rows[r.key]) for r in runs}
        recs, self.explained = [], {}
        for view in runs:
            for i, row in enumerate(self.rows[view.key]):
                ex = explain(view, row)
                self.explained[(view.key, i)] = ex
                recs.append((view.key, i, str(row.get("sample_id")), view.benchmark, view.subject, view.entry,
                             _setting(view, row), ex.verdict or "", str(row.get("status") or "ok"),
                             _search_text(row, ex)))
        self.index = pd.DataFrame([r[:-1] for r in recs], columns=["run", "row", "sample_id", "benchmark", "subject",
                                                                   "entry", "setting", "verdict", "status"])
        # the text search: every row's search text in one string (rows apart by a separator no text holds)
        texts = [r[-1].replace(SEP, " ") for r in recs]
        self._starts = np.cumsum([0] + [len(t) + 1 for t in texts])
        self._blob = SEP.join(texts) + SEP
        self.stores = {r.key: CachedStore(r.transcripts_root) for r in runs}
        self.by_id = {(r, s): i for i, (r, s) in enumerate(zip(self.index["run"], self.index["sample_id"]))}
        self.options = {k: sorted(set(self.index[k])) for k in ("benchmark", "subject", "entry", "setting")}
        self.options["verdict"] = list(VERDICTS)

    @classmethod
    def open(cls, sources: Iterable[str | Path]) -> "Viewer":
        sources = [str(s) for s in sources]
        return cls(open_runs(sources), sources)

    def query(self, filters: dict[str, str], text: str = "", only: list[int] | None = None) -> pd.DataFrame:
        """The index rows that pass every filter (exact values) and contain ``text`` (case-insensitive); ``only``:
        those index rows alone, in that order (a labelling queue)."""
        mask = pd.Series(True, index=self.index.index)
        for k in FILTERS:
            v = filters.get(k)
            if v:
                mask &= self.index[k] == v
        if text.strip():
            mask &= self._contains(text.strip().casefold().replace(SEP, " "))
        if only is not None:
            return self.index.iloc[only][mask.iloc[only].to_numpy()]
        return self.index[mask]

    def _contains(self, needle: str) -> np.ndarray:
        """Which rows' search text contains ``needle`` (one scan of the joined texts)."""
        hit = np.zeros(len(self.index), dtype=bool)
        pos, blob, starts = self._blob.find(needle), self._blob, self._starts
        while pos != -1:
            row = int(np.searchsorted(starts, pos, side="right")) - 1
            hit[row] = True
            pos = blob.find(needle, int(starts[row + 1]))
        return hit

    def page(self, filters: dict[str, str], text: str = "", page: int = 1, size: int = PAGE_SIZE,
             only: list[int] | None = None) -> dict:
        hits = self.query(filters, text, only)
        pages = max(1, math.ceil(len(hits) / size))
        page = min(max(1, page), pages)
        rows = []
        for rec in hits.iloc[(page - 1) * size: page * size].itertuples(index=False):
            ex = self.explained[(rec.run, rec.row)]
            rows.append({"run": self.by_key[rec.run].label, "run_key": rec.run, "sample_id": rec.sample_id,
                         "setting": rec.setting, "status": rec.status, "verdict": rec.verdict,
                         "href": sample_path(rec.run, rec.sample_id), "answer": _head(ex.answer, 160),
                         "gold": _head(ex.gold, 120), "reason": _head(ex.reason, 160)})
        return {"rows": rows, "total": len(hits), "page": page, "pages": pages}

    def find(self, sample_id: str, run: str | None = None, subject: str | None = None,
             entry: str | None = None) -> tuple[StoredRun, dict]:
        """The row of a sample: in ``run`` (the run's key) when given, else in the first run holding that id (of
        that ``subject`` and benchmark ``entry`` when given: the report's links name a run so)."""
        if run is not None:
            hit = self.by_id.get((run, sample_id))
        else:
            hit = next((i for (r, s), i in self.by_id.items() if s == sample_id
                        and (not subject or self.by_key[r].subject == subject)
                        and (not entry or self.by_key[r].entry == entry)), None)
        if hit is None:
            where = f"run {run}" if run is not None else ", ".join(self.sources)
            looked = [self.by_key[run]] if run in self.by_key else [] if run is not None else self.runs
            raise KeyError(f"no sample {sample_id!r} in {where}" + "".join(
                f"; {why}" for why in map(_samples_missing, looked) if why))
        view = self.by_key[self.index["run"].iat[hit]]
        return view, self.rows[view.key][int(self.index["row"].iat[hit])]

    def sample(self, view: StoredRun, row: dict) -> dict:
        """What a sample page shows: the explanation, the resolved calls, what is missing, the other fields."""
        hit = self.by_id.get((view.key, str(row.get("sample_id"))))
        ex = self.explained[(view.key, int(self.index["row"].iat[hit]))] if hit is not None else explain(view, row)
        fields = {k: v for k, v in row.items() if k != "outputs" and v is not None}
        return {"run": view, "row": row, "sample_id": str(row.get("sample_id")), "setting": _setting(view, row),
                "status": str(row.get("status") or "ok"),
                **transcript_of(view, row, ex, self.stores.get(view.key)), "run_notes": self.notes.get(view.key, []),
                "fields": json.dumps(fields, indent=1, ensure_ascii=False, default=str)}


def transcript_of(run: StoredRun, row: dict, ex: Explanation, store: TextStore | None = None) -> dict:
    """A sample's transcript as the templates' ``transcript`` macro takes it: ``calls`` (resolved from the run's
    text store), ``notes`` (missing texts named; a run written before transcripts) and ``explanation``."""
    found = calls(row)
    notes = []
    try:
        resolve(found, store or run.transcripts)
    except Exception as e:  # noqa: BLE001 - an unreadable store: everything else still shows, named here
        notes.append(f"the run's transcripts could not be read ({type(e).__name__}: {e})")
    missing = sorted({k for c in found for k in c.missing})
    if missing:
        notes.append(f"{len(missing)} text(s) are missing from {run.transcripts_location} (missing or "
                     f"unreadable shards): {', '.join(missing)}")
    if found and not any(c.request for c in found):
        notes.append(NO_TRANSCRIPTS)
    return {"calls": [call_view(c) for c in found], "notes": notes, "explanation": ex}


def _head(text: str | None, n: int) -> str:
    if not text:
        return ""
    return text if len(text) <= n else text[: n - 1] + "…"


def sample_path(run: str, sample_id: str) -> str:
    return "/sample?" + urlencode({"run": run, "id": sample_id})


def samples_path(**filters: str) -> str:
    """The viewer's list filtered, e.g. ``/samples?benchmark=prefeval&verdict=wrong``."""
    return "/samples" + ("?" + urlencode({k: v for k, v in filters.items() if v}) if any(filters.values()) else "")


def _text(text: str) -> dict:
    """A message's text as shown: whole, or its head with the whole behind an expander."""
    long = len(text) > LONG_TEXT
    return {"full": text, "head": text[:TEXT_HEAD] if long else text, "long": long, "chars": len(text)}


def call_view(c: Call) -> dict:
    """One call as the templates show it: its messages (the middle of a long conversation folded), the output,
    the finish reason, tokens, latency, the rendered prompt and the request's sampling and constraint."""
    msgs = [{"role": m["role"], **_text(m["content"])} for m in c.messages]
    fold = len(msgs) > HEAD_MESSAGES + TAIL_MESSAGES + 1
    r = c.result
    out = r.get("text")
    return {"stage": c.stage, "index": c.index, "role": c.role, "request": c.request is not None,
            "head": msgs[:HEAD_MESSAGES] if fold else msgs, "middle": msgs[HEAD_MESSAGES:-TAIL_MESSAGES] if fold else [],
            "tail": msgs[-TAIL_MESSAGES:] if fold else [],
            "middle_chars": sum(m["chars"] for m in msgs[HEAD_MESSAGES:-TAIL_MESSAGES]) if fold else 0,
            "output": _text(out) if isinstance(out, str) else None, "finish_reason": r.get("finish_reason"),
            "error": r.get("error"), "from_cache": r.get("from_cache"), "computed_for": r.get("computed_for"),
            "tokens": {k: r.get(k) for k in ("prompt_tokens", "cached_prompt_tokens", "completion_tokens")},
            "latency_s": r.get("latency_s"), "prompt": _text(c.prompt) if c.prompt else None,
            "missing": c.missing,
            "sampling": json.dumps(c.request.get("sampling"), ensure_ascii=False) if c.request else "",
            "constraint": json.dumps(c.request.get("constraint"), ensure_ascii=False)
            if c.request and c.request.get("constraint") else ""}


def templates() -> jinja2.Environment:
    """The viewer's (and the report's transcript) templates, autoescaped."""
    return jinja2.Environment(loader=jinja2.PackageLoader("llmrec.pipelines.results", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined)


# ---- the web app ----------------------------------------------------------------------------------------------

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def _host_of(value: str) -> str:
    """The host of a ``Host`` header or an ``Origin`` (``http://name:port``), lowercase, without port or brackets."""
    value = value.strip().lower()
    if "://" in value:
        value = value.split("://", 1)[1].split("/", 1)[0]
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(host: str, bound: str) -> bool:
    """Whether a request naming ``host`` (its Host header or Origin) is one for a viewer listening on ``bound``:
    the bound address itself and the loopback names; a viewer on every interface (``0.0.0.0``, ``::``) also takes
    this machine's names and any address literal. Any other name (``evil.example``) is a page that had its name
    point at this machine (DNS rebinding) to read the transcripts: refused."""
    import ipaddress
    import socket

    host, bound = _host_of(host), _host_of(bound)
    if not host:
        return False
    if host == bound or host in LOCAL_NAMES:
        return True
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None and literal.is_loopback:
        return True
    if bound in ("0.0.0.0", "::", ""):
        return literal is not None or host in {socket.gethostname().lower(), socket.getfqdn().lower()}
    return False


TOKEN_COOKIE = "llmrec_view_token"
MAX_LABEL_BODY = 64 * 1024


def refusal(headers, token: str, expected: str) -> str | None:
    """Why a label POST is refused, None when it is not: it must come from a page of this viewer (its ``Origin``,
    else its ``Referer``, names the same scheme-less host and port as its ``Host``) and carry the writing token."""
    import secrets
    from urllib.parse import urlsplit

    source = headers.get("origin") or headers.get("referer") or ""
    if not source or source == "null":
        return "refused: a label must be posted from the viewer's own page (no Origin or Referer)"
    got = urlsplit(source)
    if got.scheme not in ("http", "https") or got.netloc.lower() != headers.get("host", "").lower():
        return f"refused: a label must be posted from the viewer's own page, not from {got.scheme}://{got.netloc}"
    if not token or not secrets.compare_digest(token, expected):
        return "refused: no valid writing token (open the address `llmrec view --annotate` printed)"
    return None


class HostCheck:
    """ASGI middleware: a request whose ``Host`` is not the viewer's (:func:`host_allowed`) gets 400; one that could
    change something (any method but GET / HEAD / OPTIONS) with a foreign ``Origin`` gets 403."""

    def __init__(self, inner, bound: str):
        self.inner, self.bound = inner, bound

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        from starlette.datastructures import Headers
        from starlette.responses import PlainTextResponse

        headers = Headers(scope=scope)
        if not host_allowed(headers.get("host", ""), self.bound):
            return await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD", "OPTIONS") and origin and not host_allowed(origin, self.bound):
            return await PlainTextResponse("Cross-origin request refused", status_code=403)(scope, receive, send)
        return await self.inner(scope, receive, send)


def app(viewer: Viewer, host: str = "127.0.0.1", pairs=None, annotate=None):
    """The Starlette app over ``viewer``: ``/samples`` (the filtered list), ``/sample?run=K&id=ID``; with ``pairs``
    (a :class:`~llmrec.pipelines.results.viewer_pairs.PairIndex` over the same viewer) also ``/pairs`` and
    ``/pair?pair=P&id=ID``, and ``/`` goes to ``/pairs``; with ``annotate`` (a
    :class:`~llmrec.pipelines.results.labels.Annotator`) sample pages carry label forms that POST to ``/label``.
    It answers only requests addressed to ``host`` (the address it listens on) or a loopback name
    (:class:`HostCheck`)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, RedirectResponse
    from starlette.routing import Route

    env = templates()
    base = {"sources": viewer.sources, "runs": viewer.runs, "notes": viewer.notes}
    queue = [viewer.by_id[k] for k in annotate.queue if k in viewer.by_id] if annotate is not None else []

    def filters_of(request: Request) -> dict[str, str]:
        return {k: request.query_params.get(k, "") for k in FILTERS}

    def token_of(request: Request) -> str | None:
        """The writing token where this browser holds it (the printed URL's ``token``, then its cookie)."""
        if annotate is None:
            return None
        import secrets

        for got in (request.query_params.get("token"), request.cookies.get(TOKEN_COOKIE)):
            if got and secrets.compare_digest(got, annotate.token):
                return annotate.token
        return None

    def respond(request: Request, html: str, status_code: int = 200) -> HTMLResponse:
        res = HTMLResponse(html, status_code=status_code)
        if annotate is not None and token_of(request) and request.query_params.get("token"):
            res.set_cookie(TOKEN_COOKIE, annotate.token, httponly=True, samesite="strict", path="/")
        return res

    async def index(request: Request):
        home = "/pairs" if pairs is not None else "/samples"
        return RedirectResponse(home + (f"?{request.url.query}" if request.url.query else ""))

    async def samples(request: Request):
        f = filters_of(request)
        q = request.query_params.get("q", "")
        try:
            page_no = int(request.query_params.get("page", "1"))
        except ValueError:
            page_no = 1
        in_queue = bool(queue) and request.query_params.get("queue") == "1"
        got = viewer.page(f, q, page_no, only=queue if in_queue else None)
        keep = {**f, "q": q, "queue": "1" if in_queue else ""}
        if annotate is not None:
            for r in got["rows"]:
                r["labels"] = annotate.of(r["run_key"], r["sample_id"])

        def page_href(n: int) -> str:
            return samples_path(**keep, page=str(n))

        html = env.get_template("viewer_list.html").render(
            **base, filters=f, q=q, options=viewer.options, got=got, page_href=page_href,
            filter_names=FILTERS, title="llmrec view", annotate=annotate is not None, queue=len(queue),
            in_queue=in_queue)
        return respond(request, html)

    async def sample(request: Request):
        sid, run = request.query_params.get("id"), request.query_params.get("run")
        subject, entry = request.query_params.get("subject"), request.query_params.get("entry")
        if not sid:
            return HTMLResponse(env.get_template("viewer_error.html").render(
                **base, title="llmrec view", message="no sample id given (/sample?run=K&id=ID)"), status_code=400)
        try:
            view, row = viewer.find(sid, run, subject, entry)
        except KeyError as e:
            return HTMLResponse(env.get_template("viewer_error.html").render(
                **base, title="llmrec view", message=str(e.args[0])), status_code=404)
        s = viewer.sample(view, row)
        labelling = None
        if annotate is not None:
            from llmrec.pipelines.results.labels import decisions_of

            labelling = {"token": token_of(request), "labels": annotate.of(view.key, s["sample_id"]),
                         "decisions": decisions_of(view, row, s["explanation"].verdict), "who": annotate.who}
        html = env.get_template("viewer_sample.html").render(
            **base, s=s, title=f"{sid} · llmrec view", labelling=labelling,
            back=samples_path(benchmark=view.benchmark, subject=view.subject, entry=view.entry))
        return respond(request, html)

    async def label(request: Request):
        from urllib.parse import parse_qs

        from starlette.responses import PlainTextResponse

        from llmrec.pipelines.results.labels import decisions_of

        body = await request.body()
        if len(body) > MAX_LABEL_BODY:
            return PlainTextResponse("label form too large", status_code=413)
        form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        why = refusal(request.headers, form.get("token", ""), annotate.token)
        if why:
            return PlainTextResponse(why, status_code=403)
        try:
            view, row = viewer.find(form.get("id", ""), form.get("run") or None)
        except KeyError as e:
            return PlainTextResponse(str(e.args[0]), status_code=404)
        sid = str(row.get("sample_id"))
        ex = viewer.explained.get((view.key, int(viewer.index["row"].iat[viewer.by_id[(view.key, sid)]])))
        try:
            annotate.record(view.key, sid, decisions_of(view, row, ex.verdict if ex else None), form)
        except ValueError as e:
            return PlainTextResponse(f"label refused: {e}", status_code=400)
        return RedirectResponse(sample_path(view.key, sid) + "#labels", status_code=303)

    routes = [Route("/", index), Route("/samples", samples), Route("/sample", sample)]
    if annotate is not None:
        routes.append(Route("/label", label, methods=["POST"]))
    if pairs is not None:
        from llmrec.pipelines.results.viewer_pairs import CHANGES, PAIR_FILTERS, pairs_path

        async def pair_list(request: Request):
            f = {k: request.query_params.get(k, "") for k in PAIR_FILTERS}
            q = request.query_params.get("q", "")
            try:
                page_no = int(request.query_params.get("page", "1"))
            except ValueError:
                page_no = 1
            got = pairs.page(f, q, page_no)
            keep = {**f, "q": q}
            html = env.get_template("viewer_pairs.html").render(
                **base, pairs=pairs, filters=f, q=q, options=pairs.options, got=got, changes=CHANGES,
                page_href=lambda n: pairs_path(**keep, page=str(n)), filter_href=lambda c: pairs_path(change=c),
                filter_names=PAIR_FILTERS, title="llmrec view · A vs B")
            return HTMLResponse(html)

        async def pair(request: Request):
            sid, p = request.query_params.get("id"), request.query_params.get("pair", "0")
            if not sid:
                return HTMLResponse(env.get_template("viewer_error.html").render(
                    **base, title="llmrec view", message="no sample id given (/pair?pair=P&id=ID)"), status_code=400)
            try:
                got = pairs.sample(p, sid)
            except KeyError as e:
                return HTMLResponse(env.get_template("viewer_error.html").render(
                    **base, title="llmrec view", message=str(e.args[0])), status_code=404)
            html = env.get_template("viewer_pair.html").render(**base, p=got, title=f"{sid} · A vs B · llmrec view",
                                                               back="/pairs")
            return HTMLResponse(html)

        routes += [Route("/pairs", pair_list), Route("/pair", pair)]
    return Starlette(routes=routes, middleware=[Middleware(HostCheck, bound=host)])


def serve(viewer: Viewer, host: str = "127.0.0.1", port: int = 0, ready=None, pairs=None, annotate=None) -> None:
    """Serve the app on ``host:port`` (port 0: a free one); ``ready(url)`` is called once it listens."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        raise ConfigError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from e
    sock.listen(128)
    got = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app(viewer, host, pairs, annotate), log_level="warning", lifespan="off"))
    if ready is not None:
        ready(f"http://{'[' + host + ']' if ':' in host else host}:{got}")
    server.run(sockets=[sock])


# ---- the terminal ---------------------------------------------------------------------------------------------

def print_sample(viewer: Viewer, sample_id: str, console, run: str | None = None, full: bool = False) -> None:
    """One sample's transcript in the terminal: every call's messages (a long conversation's middle folded unless
    ``full``), its output, finish reason, tokens and latency, then the answer, gold, verdict and reason."""
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.text import Text

    view, row = viewer.find(sample_id, run)
    s = viewer.sample(view, row)
    console.print(Rule(Text(f"{s['sample_id']}  ·  {view.label}  ·  {view.benchmark}")))
    console.print(Text(f"run: {view.dir.uri}\nsetting: {s['setting'] or '—'}   status: {s['status']}"))
    for note in dict.fromkeys(s["run_notes"] + s["notes"]):
        console.print(Text(f"note: {note}", style="yellow"))
    for c in s["calls"]:
        console.print(Rule(Text(f"call {c['stage']}[{c['index']}] · {c['role']} engine")))
        shown_middle = bool(c["middle"]) and not full
        for i, m in enumerate(c["head"] + c["middle"] + c["tail"]):
            if shown_middle and len(c["head"]) <= i < len(c["head"]) + len(c["middle"]):
                if i == len(c["head"]):
                    console.print(Text(f"… {len(c['middle'])} messages ({c['middle_chars']} characters) folded: "
                                       "--full shows them", style="dim"))
                continue
            console.print(Panel(Text(m["full"]), title=Text(m["role"]), title_align="left",
                                border_style="blue" if m["role"] == "user" else "magenta" if m["role"] == "system"
                                else "green"))
        if c["prompt"]:
            console.print(Panel(Text(c["prompt"]["full"]), title=Text("engine-rendered prompt"), title_align="left",
                                border_style="dim"))
        console.print(Panel(Text(c["output"]["full"] if c["output"] else "(no output)"),
                            title=Text("raw output"), title_align="left", border_style="green"))
        t = c["tokens"]
        console.print(Text(f"finish: {c['finish_reason'] or '—'}   tokens: prompt {_n(t['prompt_tokens'])}, cached "
                           f"{_n(t['cached_prompt_tokens'])}, completion {_n(t['completion_tokens'])}   latency: "
                           f"{_secs(c['latency_s'])}" + ("   (from the request cache)" if c["from_cache"] else "")
                           + (f"   computed for another run: {c['computed_for']}" if c.get("computed_for") else "")
                           + (f"   error: {c['error']}" if c["error"] else "")))
    ex = s["explanation"]
    console.print(Rule(Text("verdict")))
    for label, value in (("answer", ex.answer), ("gold", ex.gold), ("verdict", ex.verdict), ("reason", ex.reason),
                         ("numbers", ", ".join(f"{k}={v}" for k, v in ex.numbers.items()) or None)):
        console.print(Text.assemble((f"{label}: ", "bold"), value if value is not None else "—"))


def _n(v: Any) -> str:
    return "—" if v is None else str(v)


def _secs(v: Any) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:.2f}s"


def open_viewer(sources: list[str]) -> Viewer:
    """The viewer over run / suite directories, or a one-line error naming the source."""
    return Viewer.open(sources)  # a missing or unreadable source: RunNotReadable (open_runs), naming it
