"""FastAPI app: a read-only HTTP API and a search page over the CURRENT snapshot.

Endpoints (all GET; nothing writes):

    /api/health                       status and the snapshot being served
    /api/search?q=...                 ranked papers with their signals and the queries used (offset, sort)
    /api/papers?sort=...              corpus papers by PageRank, citations, date or title (author, category, years)
    /api/papers/{paper_id}            metadata, authors, links, abstract, figure legends, metrics, counts, sections
    /api/papers/{paper_id}/references the papers it cites (printed order, citations or year; limit, offset)
    /api/papers/{paper_id}/cited-by   the papers citing it
    /api/papers/{paper_id}/related    connected papers, the graph among them, prior and derivative works
    /api/authors/{name}               an author's papers, co-authors and years
    /api/examples                     example queries and ids taken from the served snapshot
    /api/snapshots                    published snapshots and which one is CURRENT
    /api/export?id=...&format=...     papers as BibTeX, RIS or CSL-JSON (also format= on search and related)
    /api/path?from=...&to=...         the shortest citation paths between two papers
    /api/recommend?pos=...&neg=...    papers like the positive seeds and unlike the negative ones, each with why
    /                                 the search page (static HTML + JS, no CDN)
    /paper?id=..., /recommend         a paper's page; recommendations from the seeds liked on the pages
    /author?name=..., /papers         an author's page; the list of papers
    /docs, /redoc, /openapi.json      the API documentation (Swagger UI and ReDoc served from static/vendor)

Hardened for serving beyond loopback: only the Host names of the setting ``serve_allowed_hosts`` are
answered (DNS rebinding), every response carries ``X-Content-Type-Options``, ``X-Frame-Options`` and a
Content-Security-Policy that the page and the docs satisfy (no inline script, nothing from another origin),
no response holds a filesystem path, and every error is a JSON ``{"detail": "<one line>"}``. The snapshot
and the query model are loaded, and one query run, before the server accepts requests (lifespan).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi import Path as Path_
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, StringConstraints

from pipeline.errors import AmbiguousName, DamagedSnapshot, MissingExtra, UnknownPaper, UserError
from pipeline.serve.holder import SnapshotHolder
from pipeline.settings import Settings

log = logging.getLogger(__name__)
STATIC = Path(__file__).resolve().parent / "static"
MAX_QUERY_CHARS = 1000
MAX_K = 100
# A data endpoint re-checks the served snapshot's files (stat only, as /api/health does on every call) at
# most this often; /api/health's answer is reused in between, so the two never disagree
SNAPSHOT_CHECK_S = 1.0
STORE_LIST_S = 10.0  # /api/snapshots of a server reading a store reuses its listing (a GET per manifest) this long
YEARS = (1000, 3000)  # the years a filter accepts (pipeline.query.filters)
MAX_FILTER_VALUE = 200
MAX_CACHED_CARDS = 200_000  # cards kept per served snapshot before the cache starts over
KEEP_CATALOGS = 3  # catalog connections kept open: the served snapshot's and those served just before
# papers whose reference lists a server keeps to resolve the citations of search results (~50 entries, ~15 kB each)
MAX_CACHED_REFERENCE_LISTS = 5_000
MAX_OFFSET = 100_000  # paging through lists (papers, references, citing papers)

# Input rules the OpenAPI schema states and FastAPI enforces (422), so that the schema and the server
# agree. The server strips text with str.strip(), whose whitespace is spelled out here (regex engines
# disagree on \s: Python's includes \x1c-\x1f, ECMAScript's U+FEFF); patterns are searched, not
# anchored, unless they say so.
_UNICODE_SPACE = r"\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x20" + _UNICODE_SPACE
NOT_BLANK = f"[^{_SPACE}]"  # a character other than whitespace
# one or more values, comma-separated: at least one that is not blank
ID_LIST = f"[^,{_SPACE}]"
# a filter value (categories, authors; comma-separated): not blank, no control characters
FILTER_LIST = rf"^[^\x00-\x1f]*[^,\x00-\x20{_UNICODE_SPACE}][^\x00-\x1f]*$"
PATTERN_WORDS = {
    NOT_BLANK: "must not be blank",
    ID_LIST: "must name a paper id (not only spaces and commas)",
    FILTER_LIST: "must hold a value (not only spaces and commas) and no control characters",
}
EXPORT_FORMATS = Literal["bibtex", "ris", "csl-json"]
# OpenAPI: what an export answers (the media types of pipeline.exports.FORMATS)
EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"content": {
    "application/x-bibtex": {"schema": {"type": "string"}},
    "application/x-research-info-systems": {"schema": {"type": "string"}},
    "application/vnd.citationstyles.csl+json": {"schema": {"type": "array", "items": {"type": "object"}}},
}, "description": "JSON, or with `format` the papers as BibTeX, RIS or CSL-JSON"}}

FEED_FORMATS = Literal["json", "atom", "md", "html", "bibtex", "ris", "csl-json"]
FEED_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"content": {
    "application/feed+json": {"schema": {"type": "object"}},
    "application/atom+xml": {"schema": {"type": "string"}},
    "text/markdown": {"schema": {"type": "string"}},
    "text/html": {"schema": {"type": "string"}},
    **EXPORT_RESPONSES[200]["content"],
}, "description": "the feed as JSON Feed 1.1 (default), Atom 1.0, a Markdown or HTML digest, or its papers as "
                  "BibTeX, RIS or CSL-JSON"}}

# The page, Swagger UI (/docs) and ReDoc (/redoc) load only files of this origin and run no inline script;
# inline *styles* stay allowed (Swagger UI, ReDoc and the page's style attributes use them), and ReDoc
# starts its search worker from a blob: URL.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:",
    "font-src 'self' data:", "connect-src 'self'", "worker-src 'self' blob:", "object-src 'none'",
    "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
])
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"referrer-policy", b"same-origin"),
]


class AuthorCandidate(BaseModel):
    """An author a name could mean: the name as printed most often, and the author's papers in the snapshot."""

    name: str
    paper_count: int


class ErrorDetail(BaseModel):
    """Every error answer: one line saying what was wrong."""

    detail: str
    candidates: list[AuthorCandidate] | None = Field(None, description="an author name that several authors match: "
                                                                       "each of them, most papers first (absent otherwise)")


_ERROR_TEXT = {
    400: "a rule across parameters that a schema cannot state (year_from after year_to, a seed both positive and "
         "negative, over 100 ids in all), or a Host header the server does not answer (or more than one)",
    404: "no such paper (or feed) in the snapshot",
    422: "a parameter breaks a rule this schema states (one line: which one and why, e.g. 'query parameter k: must "
         "be <= 100')",
    503: "nothing to serve: no snapshot published yet, or the served snapshot is unavailable (gone, or a file it "
         "lists missing or resized: the line /api/health gives), or this install cannot encode its queries (a snapshot "
         "without its query encoder on an install without the [encoders] extra)",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorDetail, "description": _ERROR_TEXT[code]} for code in codes}


def _host_of(header: str) -> str:
    """``example.com:8000`` -> ``example.com``; ``[::1]:8000`` -> ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(host: str, allowed: list[str]) -> bool:
    for pattern in (a.strip().lower().strip("[]") for a in allowed):
        if pattern == "*" or host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])):
            return True
    return False


class Guard:
    """Pure ASGI middleware (no per-request task, unlike ``BaseHTTPMiddleware``): refuses Host headers
    outside ``allowed_hosts``, and a request with more than one (servers and proxies disagree on which one
    counts), with a one-line 400, and adds the security headers to every response."""

    def __init__(self, app, allowed_hosts: list[str]):
        self.app, self.allowed = app, list(allowed_hosts)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        hosts = [v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == b"host"]
        raw = hosts[0] if hosts else ""
        host = _host_of(raw)
        if len(hosts) > 1:
            detail = f"{len(hosts)} Host headers: a request names one host"
            response = JSONResponse(status_code=400, content={"detail": detail})
            return await self._with_headers(response, scope, receive, send)
        if not host or not host_allowed(host, self.allowed):
            detail = (f"host {raw or '(none)'!r} is not served here: add it to the setting "
                      "PAPERKB_SERVE_ALLOWED_HOSTS to serve it")
            response = JSONResponse(status_code=400, content={"detail": detail})
            return await self._with_headers(response, scope, receive, send)

        await self._with_headers(self.app, scope, receive, send)

    @staticmethod
    async def _with_headers(app, scope, receive, send):
        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                headers.extend((k, v) for k, v in SECURITY_HEADERS if k not in present)
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_headers)


def _validation_line(errors: list[dict[str, Any]]) -> str:
    """FastAPI's list of validation errors as one line: ``query parameter k: must be <= 100``."""
    parts = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ()) if not isinstance(x, int)]  # not the index of a repeated one
        where = f"{loc[0]} parameter {'.'.join(loc[1:])}" if len(loc) > 1 else (loc[0] if loc else "request")
        ctx, kind = e.get("ctx") or {}, e.get("type", "")
        if kind == "missing":
            why = "is required"
        elif kind in ("less_than_equal", "less_than", "greater_than_equal", "greater_than"):
            op = {"less_than_equal": "<=", "less_than": "<", "greater_than_equal": ">=", "greater_than": ">"}[kind]
            bound = next(iter(ctx.values()), "?")
            why = f"must be {op} {bound}"
        elif kind == "string_too_short":
            why = "must not be empty" if ctx.get("min_length") == 1 else f"must be at least {ctx.get('min_length')} characters"
        elif kind == "string_too_long":
            why = f"must be at most {ctx.get('max_length')} characters"
        elif kind == "too_long":
            why = f"at most {ctx.get('max_length')} values"
        elif kind == "string_pattern_mismatch":
            why = PATTERN_WORDS.get(str(ctx.get("pattern")), f"must match the pattern {ctx.get('pattern')!r}")
        elif kind == "int_parsing":
            why = "must be an integer"
        elif kind == "bool_parsing":
            why = "must be true or false"
        else:
            msg = str(e.get("msg", "is invalid"))
            why = msg.replace("Input should be", "must be", 1)
            why = why[:1].lower() + why[1:]
        parts.append(f"{where}: {why}")
    return "; ".join(parts) or "invalid request"


def _no_paths(value: Any) -> Any:
    """``value`` without filesystem paths: keys named ``path``/``*_path``/``*_dir`` and absolute-path strings."""
    if isinstance(value, dict):
        return {k: _no_paths(v) for k, v in value.items()
                if not (k == "path" or k.endswith(("_path", "_dir")) or (isinstance(v, str) and v.startswith("/")))}
    if isinstance(value, list):
        return [_no_paths(v) for v in value]
    return value


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out


# Parameter types that carry the rules above into the schema (list items included)
PaperId = Annotated[str, Path_(pattern=NOT_BLANK, description="a paper id: the corpus id, or its unambiguous "
                                                             "external id (arXiv id, collection docno), or what "
                                                             "people paste for it: arXiv:1706.03762, 1706.03762v5, "
                                                             "an arXiv or doi.org address, a DOI, an exact title")]
IdList = Annotated[str, StringConstraints(pattern=ID_LIST)]
FilterValue = Annotated[str, StringConstraints(max_length=MAX_FILTER_VALUE, pattern=FILTER_LIST)]


def create_app(settings: Settings, snapshot_id: str | None = None, snapshots: list[str] | None = None) -> FastAPI:
    """The app over ``settings``' CURRENT (or ``snapshot_id``); ``snapshots`` (default: the setting
    ``serve_snapshots``), two or more ``[NAME=]WHERE``: /api/search and the page search them as one ranking
    (:mod:`pipeline.serve.multi_holder`), the first one answers everything else."""
    from pipeline.serve.multi_holder import MultiHolder, split_specs

    specs = snapshots if snapshots is not None else split_specs(getattr(settings, "serve_snapshots", None))
    multi = MultiHolder(settings, specs) if len(specs) > 1 else None
    holder = multi.primary if multi is not None else SnapshotHolder(settings, pinned=snapshot_id)
    max_query_chars = min(MAX_QUERY_CHARS, settings.query_max_chars)
    # Searching is CPU-bound (query encoding, LanceDB, numpy). Letting every HTTP thread search at
    # once only makes them fight for the cores; a few at a time gives more requests/s. The rest wait
    # in the executor's first-in-first-out queue (a semaphore lets late arrivals barge ahead, which
    # stretched the p95), so a request waits for at most the searches queued before it.
    searching = ThreadPoolExecutor(max_workers=settings.serve_concurrency or os.cpu_count() or 1,
                                   thread_name_prefix="paperkb-serve-search")

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        # Open (and pin: retention must see the pin) the snapshot, load the query model and run one query
        # before the server accepts requests: the first search is then as fast as the tenth (uvicorn
        # binds after this).
        await asyncio.get_running_loop().run_in_executor(searching, warm_up, multi or holder)
        yield
        searching.shutdown(wait=False, cancel_futures=True)
        for con in list(catalogs.values()):
            con.close()
        (multi or holder).close()  # unpin

    app = FastAPI(
        title="paperkb",
        version="1",
        description="Read-only search over a published paperkb snapshot: hybrid BM25 + vector search "
        "with the five-signal score, paper details and connected papers. Every error answer is "
        '`{"detail": "<one line>"}`.',
        docs_url=None,  # served below from local files: FastAPI's pages load Swagger UI and ReDoc from a CDN
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.holder = holder
    app.state.multi = multi
    app.add_middleware(Guard, allowed_hosts=settings.serve_allowed_hosts)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _validation_line(list(exc.errors()))})

    def _internal_error(exc: Exception) -> JSONResponse:
        log.error("request failed", exc_info=exc)
        first = (str(exc).strip().splitlines() or [""])[0]
        return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}: {first}"})

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        return _internal_error(exc)

    @app.exception_handler(UnknownPaper)
    async def _unknown(_: Request, exc: UnknownPaper) -> JSONResponse:
        more = {"candidates": [{"name": n, "paper_count": k} for n, k in exc.candidates]} \
            if isinstance(exc, AmbiguousName) else {}  # the authors a name could mean
        return JSONResponse(status_code=404, content={"detail": str(exc), **more})

    @app.exception_handler(UserError)
    async def _user(_: Request, exc: UserError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(MissingExtra)
    async def _missing_extra(_: Request, exc: MissingExtra) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)})  # this install's, not the request's

    @app.exception_handler(DamagedSnapshot)
    async def _damaged(_: Request, exc: DamagedSnapshot) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    # (the Opened checked, when, its problem): data endpoints re-check at most every SNAPSHOT_CHECK_S
    # seconds (a check stats every file of the snapshot), /api/health and I/O errors on every call
    last_check: list[tuple[Any, float, str | None]] = [(None, 0.0, None)]

    def _snapshot_problem(max_age_s: float = 0.0) -> str | None:
        """One line when the served snapshot is gone or damaged (stat only), else None."""
        from pipeline.serve.holder import gone_error

        cur = holder.served
        if cur is None:
            return None
        seen, when, problem = last_check[0]
        if seen is cur and time.monotonic() - when < max_age_s:
            return problem
        if cur.gone():
            problem = str(gone_error(cur.snapshot_id))
        else:
            problems = cur.searcher.snap.check()
            problem = str(DamagedSnapshot(cur.snapshot_id, problems)) if problems else None
        last_check[0] = (cur, time.monotonic(), problem)
        return problem

    # LanceDB and the filesystem fail with these when files vanish from under a reader: 503 with one
    # line when the snapshot is to blame, else the error stands (500)
    @app.exception_handler(RuntimeError)
    @app.exception_handler(OSError)
    async def _io(_: Request, exc: Exception) -> JSONResponse:
        problem = _snapshot_problem()
        if problem is None:
            return _internal_error(exc)
        log.warning("%s (%s)", problem, str(exc).splitlines()[0][:200])
        return JSONResponse(status_code=503, content={"detail": problem})

    def opened():
        """The served snapshot for a data endpoint: 503 with /api/health's line when health would call it
        unusable (nothing published, deleted, or a listed file missing or resized), so they always agree."""
        try:
            cur = holder.get()
        except DamagedSnapshot:
            raise  # 503 with its own line
        except UserError as exc:
            raise HTTPException(status_code=503, detail=f"no snapshot to serve: {exc}") from exc
        problem = _snapshot_problem(max_age_s=SNAPSHOT_CHECK_S)
        if problem is not None:
            raise HTTPException(status_code=503, detail=problem)
        return cur

    from pipeline.query import reading

    # one read-only connection per served snapshot, opened on first use (opening costs ~15 ms, a cursor
    # nothing); a request reads through its own cursor. The few last snapshots' stay open for requests
    # still on them; all close at shutdown.
    catalogs: dict[str, Any] = {}
    catalogs_lock = threading.Lock()

    @contextmanager
    def catalog(cur):
        """A cursor on the catalog of the snapshot ``cur`` serves, closed after the block."""
        with catalogs_lock:
            con = catalogs.get(cur.snapshot_id)
            if con is None:
                con = catalogs[cur.snapshot_id] = cur.searcher.snap.catalog()
                for old in list(catalogs)[:-KEEP_CATALOGS]:
                    catalogs.pop(old).close()
            cursor = con.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    # the cards (citations, venue, links) of the papers results show, per snapshot: a snapshot never
    # changes, and the catalog query costs ~7 ms of CPU per page, twice the search itself on CISI
    card_cache: dict[str, dict[str, Any]] = {}

    def result_cards(cur, ids: list[str]) -> dict[str, Any]:
        seen = card_cache.get(cur.snapshot_id)
        if seen is None or len(seen) > MAX_CACHED_CARDS:
            card_cache.clear()
            seen = card_cache[cur.snapshot_id] = {}
        missing = [i for i in dict.fromkeys(ids) if i not in seen]
        if missing:
            with catalog(cur) as con:
                found = reading.paper_cards(con, missing)
            seen.update({i: found.get(i) for i in missing})
        return {i: seen[i] for i in ids if seen.get(i) is not None}

    reference_lists: dict[str, bool] = {}  # snapshot id -> whether it holds a reference list read from a PDF
    reference_lists_read: dict[str, dict[str, list]] = {}  # snapshot id -> paper id -> its reference list's entries
    cited_titles_read: dict[str, dict[str, list]] = {}  # snapshot id -> paper id -> the titles it cites outside the corpus

    def per_snapshot(cache: dict[str, dict[str, list]], cur) -> dict[str, list]:
        """The papers' lists ``cache`` keeps for ``cur``'s snapshot (started over past
        :data:`MAX_CACHED_REFERENCE_LISTS` papers or :data:`KEEP_CATALOGS` snapshots)."""
        listed = cache.setdefault(cur.snapshot_id, {})
        if len(listed) > MAX_CACHED_REFERENCE_LISTS or len(cache) > KEEP_CATALOGS:
            cache.clear()
            listed = cache[cur.snapshot_id] = {}
        return listed

    def has_reference_lists(cur) -> bool:
        """Whether the snapshot has PDF reference lists to resolve citations with (a collection of abstracts has none:
        its searches skip the query)."""
        if cur.snapshot_id not in reference_lists:
            with catalog(cur) as con:
                reference_lists[cur.snapshot_id] = con.execute("SELECT 1 FROM paper_references LIMIT 1").fetchone() is not None
        return reference_lists[cur.snapshot_id]

    @app.get("/api/health", summary="Service status and the snapshot being served", responses=_errors(400, 503))
    def health() -> Any:
        try:
            cur = holder.get()
        except UserError as exc:
            problem: str | None = str(exc) if isinstance(exc, DamagedSnapshot) else f"no snapshot to serve: {exc}"
        else:
            problem = _snapshot_problem()  # every listed file stat'ed: gone or damaged is not "ok"
        if problem is not None:
            served = holder.served
            return JSONResponse(status_code=503, content={
                "status": "unavailable", "snapshot_id": served.snapshot_id if served else None, "detail": problem})
        behind = holder.problem  # a store's snapshot served in place of the one its CURRENT names: why
        if behind is not None:
            return {"status": "degraded", "snapshot_id": cur.snapshot_id, "detail": behind}
        return {"status": "ok", "snapshot_id": cur.snapshot_id}

    @app.get("/api/search", response_model=dict[str, Any], summary="Hybrid search: ranked papers with their five signals",
             description="Each result: the paper's card, its best passage (`passage`, and `excerpt` from the sentence "
                         "that matches best) with `page`, `section` and `role`, `score` and `signals`; `citations` "
                         "(papers whose PDF reference list was read): each in-text citation of the excerpt, `start` "
                         "and `end` in it and the `works` it cites (`paper_id`, `work_id`, `title`, `year`, `raw`). "
                         "`cited_works` (on the first page, `offset` 0): up to 3 works outside the corpus that the "
                         "results cite and whose title the query names (their pages: /api/works/{work_id}), each with "
                         "`match` (the share of its title's words the query holds), `cited_by_results` and "
                         "`cited_here` (corpus papers citing it).",
             responses={**EXPORT_RESPONSES, **_errors(400, 422, 503)})
    async def search(
        q: str = Query(..., description="the query (not blank)", min_length=1, max_length=max_query_chars,
                       pattern=NOT_BLANK),
        k: int = Query(10, ge=1, le=MAX_K, description="number of papers"),
        fusion: Literal["blend", "interleave", "rrf"] = Query("blend"),
        expand: Literal["off", "rm3", "prf", "llm", "auto"] | None = Query(
            None, description="query expansion (default: the server's setting: the LLM when configured, else rm3)"),
        rerank: bool = Query(False, description="cross-encoder rerank of the top candidates"),
        title_boost: bool = Query(False, description="title-match boosts"),
        year_from: int | None = Query(None, ge=YEARS[0], le=YEARS[1], description="first year (not after year_to)"),
        year_to: int | None = Query(None, ge=YEARS[0], le=YEARS[1], description="last year (not before year_from)"),
        category: list[FilterValue] | None = Query(None, max_length=50, description="categories (repeat or comma-separate)"),
        author: list[FilterValue] | None = Query(None, max_length=50, description="author names (repeat or comma-separate)"),
        format: EXPORT_FORMATS | None = Query(None, description="answer with the results as bibtex, ris or csl-json instead of JSON"),
        offset: int = Query(0, ge=0, le=MAX_K - 1, description=f"skip this many papers (paging through the best {MAX_K})"),
        sort: Literal["relevance", "date", "citations"] = Query(
            "relevance", description=f"relevance, or the best {MAX_K} papers by date (newest first) or citations"),
    ) -> Any:  # a dict, or an export's Response (response_model: the dict)
        if year_from is not None and year_to is not None and year_from > year_to:
            raise HTTPException(status_code=400, detail=f"year_from {year_from} is after year_to {year_to}")
        from pipeline.query import Filters

        filters = Filters(year_from=year_from, year_to=year_to, categories=_split(category), authors=_split(author))

        # relevance: one more than the page, to say whether there are more; date or citations: the best MAX_K,
        # sorted, then the page
        pool = min(MAX_K, offset + k + 1) if sort == "relevance" else MAX_K

        def run():
            cur = opened()
            by_index: dict[str, Any] = {}
            if multi is not None:  # every index, one ranking; each result's card from its own index's catalog
                mcur = multi.get()
                resp = mcur.searcher.search(q, k=pool, filters=filters, fusion=fusion, expand=expand, rerank=rerank,
                                            title_boost=title_boost)
                by_index = dict(zip(mcur.names, mcur.opened))
            else:
                resp = cur.searcher.search(q, k=pool, filters=filters, fusion=fusion, expand=expand, rerank=rerank,
                                           title_boost=title_boost)
            found = [r.to_dict() for r in resp.results]
            shown = found if sort != "relevance" else found[offset:offset + k]
            for index in dict.fromkeys(r.get("index") for r in shown):
                # citation counts (sorting, the page) and links of the papers listed, from their own index
                known = result_cards(cur if index is None else by_index[index],
                                     [r["paper_id"] for r in shown if r.get("index") == index])
                for r in found:
                    card = known.get(r["paper_id"]) if r.get("index") == index else None
                    if card is not None:
                        r["citation_count"], r["venue"], r["links"] = card.citation_count, card.venue, _asdict(card.links)
            if sort == "date":
                found.sort(key=lambda r: -(r.get("year") or 0))  # stable: relevance within a year
            elif sort == "citations":
                found.sort(key=lambda r: -(r.get("citation_count") or 0))
            # the in-text citations of each best passage shown, resolved by its paper's reference list (first index)
            first = resp.indexes[0]["index"] if resp.indexes else None
            mine = [r for r in found[offset:offset + k] if r.get("index") == first]
            if mine and has_reference_lists(cur):
                with catalog(cur) as con:
                    marks = reading.passage_citations(con, [(r["paper_id"], r.get("excerpt") or "") for r in mine],
                                                      per_snapshot(reference_lists_read, cur))
                for r, m in zip(mine, marks):
                    r["citations"] = m
            # works outside the corpus whose title the query names, among those the results cite (the first page's
            # answer: later pages do not repeat it)
            named: list = []
            ours = [r["paper_id"] for r in found if r.get("index") == first]
            if ours and offset == 0 and reading.may_cite_outside(cur.searcher.snap.manifest):
                with catalog(cur) as con:
                    named = reading.cited_works_named(con, q, ours, known=per_snapshot(cited_titles_read, cur))
            return cur, resp, found, named

        cur, resp, found, named = await asyncio.get_running_loop().run_in_executor(searching, run)
        page = found[offset:offset + k]
        if format:
            return _export_response(cur.searcher.snap, [r["paper_id"] for r in page], format, "search")
        several = {"indexes": resp.indexes, "normalisation": resp.normalisation} if resp.indexes else {}
        return _json({
            "snapshot_id": resp.snapshot_id if resp.indexes else cur.snapshot_id,
            **several,
            "query": q,
            "queries": list(resp.queries),
            "notes": list(resp.notes),
            "offset": offset,
            "sort": sort,
            "more": len(found) > offset + k,
            "results": page,
            "cited_works": [w.to_dict() for w in named],
        })

    examples_of: dict[str, Any] = {}  # snapshot id -> its Examples (computed once per snapshot)

    @app.get("/api/examples", response_model=reading.Examples, summary="Example queries and ids from the served snapshot",
             description="What the page shows as placeholders: short queries made from the titles of the most "
                         "central papers, the most central paper's id, the most frequent author and category, "
                         "and the years the snapshot covers.",
             responses=_errors(400, 503))
    def examples() -> Any:
        cur = opened()
        if cur.snapshot_id not in examples_of:
            with catalog(cur) as con:
                examples_of.clear()
                examples_of[cur.snapshot_id] = reading.examples(con)
        return examples_of[cur.snapshot_id]

    @app.get("/api/papers", response_model=reading.PaperPage, summary="Corpus papers, sorted and filtered",
             description="`sort`: `pagerank` (most central first), `citations`, `date` (newest first) or `title`; "
                         "`author`: part of an author's name (any case, accents optional) or the name as cited; "
                         "`category`: an arXiv category.",
             responses=_errors(400, 422, 503))
    def list_papers(
        sort: Literal["pagerank", "citations", "date", "title"] = Query("pagerank"),
        author: FilterValue | None = Query(None, description="part of an author's name (any case, accents optional) or "
                                                             "the name as cited ('A. Vaswani')"),
        category: FilterValue | None = Query(None, description="a category, primary or not"),
        year_from: int | None = Query(None, ge=YEARS[0], le=YEARS[1], description="first year (not after year_to)"),
        year_to: int | None = Query(None, ge=YEARS[0], le=YEARS[1], description="last year (not before year_from)"),
        limit: int = Query(20, ge=1, le=reading.MAX_LIMIT),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
    ) -> Any:
        if year_from is not None and year_to is not None and year_from > year_to:
            raise HTTPException(status_code=400, detail=f"year_from {year_from} is after year_to {year_to}")
        cur = opened()
        with catalog(cur) as con:
            return reading.list_papers(con, sort=sort, author=author, category=category, year_from=year_from,
                                       year_to=year_to, limit=limit, offset=offset)

    @app.get("/api/authors/{name:path}", response_model=reading.AuthorProfile, summary="An author's papers, co-authors and years",
             description="Names that differ only in case, accents, spacing and punctuation are one author "
                         "(`Perlis, A. J.` = `Perlis, A.J.`). A name that is none of them names the one author it "
                         "matches in part: a surname alone, initials, either order (`Dijkstra`, `David Gries` for "
                         "`Gries, D.`; `asked` then holds the name given); when several match, the 404 lists them "
                         "in `candidates`, most papers first.", responses=_errors(400, 404, 422, 503))
    def author(name: Annotated[str, Path_(min_length=1, max_length=MAX_FILTER_VALUE, pattern=FILTER_LIST,
                                          description="the author's name as printed")],
               limit: int = Query(50, ge=1, le=reading.MAX_LIMIT, description="at most this many papers (most cited first)"),
               ) -> Any:
        cur = opened()
        with catalog(cur) as con:
            return reading.author_profile(con, name, limit=limit)

    @app.get("/api/papers/{paper_id:path}/references", response_model=reading.ReferencePage,
             summary="The papers a paper cites",
             description="Its printed bibliography first when its PDF was read (`sort=order`: as printed; an entry "
                         "that matched no known paper has `raw`, its text as printed), then the citation edges no "
                         "printed entry gave (Semantic Scholar's, a collection's). A corpus paper has a `paper_id`. "
                         "A printed entry has `contexts`: the first sentences of the paper that cite it (`text`, "
                         "`page`, `section`, `marker`: [start, end) of the in-text citation) and `mentions`, how "
                         "many sentences do.",
             responses=_errors(400, 404, 422, 503))
    def references(paper_id: PaperId, limit: int = Query(20, ge=1, le=reading.MAX_LIMIT),
                   offset: int = Query(0, ge=0, le=MAX_OFFSET),
                   sort: Literal["order", "citations", "year", "mentions"] = Query(
                       "order", description="order: as printed; citations: most cited first; year: newest first; "
                                            "mentions: the most cited in the paper's own text first")) -> Any:
        cur = opened()
        with catalog(cur) as con:
            return reading.references(con, paper_id, limit=limit, offset=offset, sort=sort)

    @app.get("/api/papers/{paper_id:path}/cited-by", response_model=reading.ReferencePage,
             summary="The papers citing a paper", description="Most cited first (`sort=citations`) or newest first "
                                                            "(`sort=year`). A corpus paper has a `paper_id`, and "
                                                            "`contexts` when its PDF's reference list names the "
                                                            "paper: the sentences of its text that cite it.",
             responses=_errors(400, 404, 422, 503))
    def cited_by(paper_id: PaperId, limit: int = Query(20, ge=1, le=reading.MAX_LIMIT),
                 offset: int = Query(0, ge=0, le=MAX_OFFSET),
                 sort: Literal["citations", "year"] = Query("citations")) -> Any:
        cur = opened()
        with catalog(cur) as con:
            return reading.cited_by(con, paper_id, limit=limit, offset=offset, sort=sort)

    @app.get("/api/papers/{paper_id:path}/related", response_model=dict[str, Any], summary="Connected papers and the graph among them",
             description="`related`: the connected papers with their components, authors and links; `edges`: the "
                         "paper to each (`kind` `related`) and the related papers among themselves (`ccbc`, `cosine` "
                         "at least `cosine_threshold`, or `ccbc+cosine`), each with a `weight` in [0, 1]; `layout`: "
                         "`{id: [x, y]}` in [-1, 1] with the paper at the origin (similar papers close together); "
                         "`prior_works` and `derivative_works` (as Connected Papers lists them): the works cited by "
                         "the most of the drawn papers, and the works citing the most of them (`count`: how many, "
                         "at least 2; the paper itself is in neither list).",
             responses={**EXPORT_RESPONSES, **_errors(400, 404, 422, 503)})
    def related(paper_id: PaperId, k: int = Query(20, ge=1, le=MAX_K),
                prior_k: int = Query(10, ge=1, le=MAX_K, description="at most this many prior and derivative works"),
                format: EXPORT_FORMATS | None = Query(None, description="answer with the related papers as bibtex, ris or csl-json instead of JSON"),
                ) -> Any:  # a dict, or an export's Response (response_model: the dict)
        cur = opened()
        center = _paper_view(cur.searcher.paper(paper_id))
        items = [r.to_dict() for r in cur.searcher.related(paper_id, k=k)]
        if format:
            return _export_response(cur.searcher.snap, [r["paper_id"] or r["work_id"] for r in items], format, "related")
        # the graph among them: CCBC and cosine edges, laid out server-side (pipeline/serve/connected.py)
        from pipeline.serve.connected import COSINE_THRESHOLD, connected_graph, unit_vectors

        cid = center.get("paper_id") or paper_id
        pairs = [(e["source"], e["target"], e["weight"]) for e in _edges(cur.searcher, cid, items)]
        graph = connected_graph(cid, items, pairs, unit_vectors(cur.searcher, [r["paper_id"] for r in items if r["paper_id"]]))
        ids = [r["paper_id"] or r["work_id"] for r in items]
        with catalog(cur) as con:  # authors and links for the hover cards; Connected Papers' two lists
            known = reading.cards(con, [cid, *[i for i in ids if i]])
            around = reading.prior_and_derivative(con, [cid, *[i for i in ids if i]], limit=prior_k, exclude=[cid])
        for r, i in zip(items, ids):
            card = known.get(i) if i else None
            r["authors"] = card.authors if card else []
            r["links"] = _asdict(card.links) if card else _asdict(reading.Links())
            if r.get("citation_count") is None and card:
                r["citation_count"] = card.citation_count
        if cid in known:
            center["authors"] = known[cid].authors or center.get("authors") or []
        return {"snapshot_id": cur.snapshot_id, "paper": center, "related": items, **graph,
                "cosine_threshold": COSINE_THRESHOLD, "prior_works": around.to_dict()["prior"],
                "derivative_works": around.to_dict()["derivative"]}

    @app.get("/api/papers/{paper_id:path}", summary="Paper metadata, authors, links, abstract, figure legends, metrics",
             description="Besides the metadata, abstract, `figures` and `metrics`: `links` (`arxiv`, `pdf`, `doi`, "
                         "`s2`, null where unknown), `bylines` (name and affiliation), `venue`, `published`, "
                         "`reference_count` and `cited_by_count` (the totals of /references and /cited-by) and "
                         "`sections` (the sections of its full text with their pages) and `full_text` (the PDF they "
                         "were read from: `status`, `reason`, `pages`, `arxiv_version`, `read_at`, `why`: the reason in "
                         "words; null without one).",
             responses=_errors(400, 404, 422, 503))
    def paper(paper_id: PaperId) -> dict[str, Any]:
        cur = opened()
        view = _paper_view(cur.searcher.paper(paper_id))
        with catalog(cur) as con:
            facts = reading.paper_facts(con, view.get("paper_id") or paper_id).to_dict()
        return {"snapshot_id": cur.snapshot_id, **view, **facts}

    @app.get("/api/works/{work_id:path}", summary="A cited work outside the corpus: what its citing papers and the citation data say of it",
             description="A work the corpus papers cite that is not a corpus paper itself (any id a paper takes: its "
                         "work id as references list it, its arXiv id, DOI or address). `work`: its card (title, "
                         "authors, year, venue, `citation_count`, `links`) as the reference lists and Semantic Scholar "
                         "give it; `reference_count` and `cited_by_count` (the totals of /api/papers/{id}/references "
                         "and /cited-by, which take a work id too); `printed`: how the citing papers' reference lists "
                         "print it (`total`, `items`: `paper_id`, `title`, `raw`, `page`, `method`, the most cited "
                         "citing paper first); `cited_with`: the works cited together with it by the most of its "
                         "`citing` papers (`count`, at least 2). An id that names a corpus paper answers "
                         "`in_corpus: true` and its `paper_id` only (/api/papers/{paper_id} has the rest).",
             responses=_errors(400, 404, 422, 503))
    def work(work_id: PaperId, top: int = Query(10, ge=1, le=reading.MAX_LIMIT,
                                                description="at most this many printed entries and works cited with it"),
             ) -> dict[str, Any]:
        from pipeline.query.paper_detail import work_detail
        from pipeline.query.records import resolve_ids

        cur = opened()
        with catalog(cur) as con:
            (kind, found), = resolve_ids(con, [work_id])
            if kind == "paper":
                return {"snapshot_id": cur.snapshot_id, "in_corpus": True, "paper_id": found}
            detail = work_detail(con, found, top=top)
        return {"snapshot_id": cur.snapshot_id, "in_corpus": False, "work": detail["work"],
                "reference_count": detail["references"]["total"], "cited_by_count": detail["cited_by"]["total"],
                "printed": detail["printed"], "cited_with": detail["cited_with"]}

    @app.get("/api/snapshots", summary="Published snapshots, the one CURRENT names and the one being served",
             responses=_errors(400, 503))
    def list_snapshots() -> dict[str, Any]:
        from pipeline import snapshots

        if holder.store is not None:
            return _store_snapshots(holder.store.root)
        items = snapshots.list_snapshots(settings.snapshots_dir)
        # ids, times, counts, models and pins only: where the warehouse lives is none of a client's business
        ids = {s["snapshot_id"] for s in items}
        try:  # the served one, when it still exists (a deleted id is never called current or served)
            serving = holder.get().snapshot_id
        except UserError:
            serving = None
        current = snapshots.current_id(settings.snapshots_dir)
        return {"current": current if current in ids else None, "serving": serving if serving in ids else None,
                "snapshots": _no_paths([s if isinstance(s, dict) else getattr(s, "to_dict", lambda: s)() for s in items])}

    store_listed: list[tuple[float, list[dict[str, Any]]]] = []  # (when, the store's snapshots): asked again after STORE_LIST_S

    def _store_snapshots(root: str) -> dict[str, Any]:
        """/api/snapshots of a server reading a store: the store's snapshots (a request per manifest, so the list
        is reused for STORE_LIST_S), a snapshot that failed to open here marked damaged, with why."""
        from pipeline.store.listing import list_store

        try:
            serving: str | None = holder.get().snapshot_id
        except UserError:
            serving = None
        if not store_listed or time.monotonic() - store_listed[0][0] > STORE_LIST_S:
            try:
                items = list_store(root)
            except UserError as exc:
                raise HTTPException(status_code=503, detail=str(exc)) from None
            store_listed[:] = [(time.monotonic(), items)]
        items = [dict(s) for s in store_listed[0][1]]
        for s in items:
            failed = holder.failed(s["snapshot_id"])
            if failed is not None:
                s["status"], s["problems"] = "damaged", [failed, *s["problems"]]
        current = next((s["snapshot_id"] for s in items if s["current"]), None)
        ids = {s["snapshot_id"] for s in items}
        return {"current": current, "serving": serving if serving in ids else None, "snapshots": _no_paths(items)}

    @app.get("/api/export", summary="Papers as BibTeX, RIS or CSL-JSON for a reference manager",
             responses={**EXPORT_RESPONSES, **_errors(400, 404, 422, 503)})
    def export(
        id: list[IdList] = Query(..., min_length=1, max_length=MAX_K,
                                 description=f"paper ids (repeat or comma-separate; at most {MAX_K} in all)"),
        format: EXPORT_FORMATS = Query("bibtex", description="bibtex | ris | csl-json"),
    ) -> Response:
        ids = _split(id)
        if len(ids) > MAX_K:  # across repeated values: beyond what a schema can say
            raise HTTPException(status_code=400, detail=f"{len(ids)} paper ids; the limit is {MAX_K}")
        return _export_response(opened().searcher.snap, ids, format, ids[0] if len(ids) == 1 else "papers")

    @app.get("/api/path", summary="The shortest citation paths between two papers (citations followed either way)",
             responses=_errors(400, 404, 422, 503))
    def path(
        source: str = Query(..., alias="from", min_length=1, max_length=200, pattern=NOT_BLANK, description="first paper id"),
        target: str = Query(..., alias="to", min_length=1, max_length=200, pattern=NOT_BLANK, description="second paper id"),
        max_length: int = Query(4, ge=1, le=8, description="longest path to look for, in hops"),
        limit: int = Query(20, ge=1, le=200, description="at most this many shortest paths"),
    ) -> dict[str, Any]:
        from pipeline.query.paths import shortest_paths

        cur = opened()
        con = cur.searcher.snap.catalog()
        try:
            res = shortest_paths(con, source, target, max_length=max_length, limit=limit)
        finally:
            con.close()
        res.snapshot_id = cur.snapshot_id
        return res.to_dict()

    @app.get("/api/recommend", response_model=dict[str, Any], summary="Papers like the positive seeds and unlike the negative ones, each with why",
             responses={**EXPORT_RESPONSES, **_errors(400, 404, 422, 503)})
    def recommend(
        pos: list[IdList] = Query(..., min_length=1, max_length=MAX_K,
                                  description=f"positive seed paper ids (repeat or comma-separate; at most {MAX_K} "
                                              "seeds in all, positive and negative)"),
        neg: list[IdList] | None = Query(None, max_length=MAX_K, description="negative seed paper ids (repeat or "
                                         "comma-separate; none of them also positive)"),
        k: int = Query(20, ge=1, le=MAX_K, description="number of papers"),
        format: EXPORT_FORMATS | None = Query(None, description="answer with the recommended papers as bibtex, ris or csl-json instead of JSON"),
    ) -> Any:  # a dict, or an export's Response (response_model: the dict)
        positives, negatives = _split(pos), _split(neg)
        cur = opened()
        resp = cur.searcher.recommend(positives, negatives, k=k)
        if format:
            return _export_response(cur.searcher.snap, [r.paper_id for r in resp.results], format, "recommend")
        return resp.to_dict()

    @app.get("/api/feeds", summary="The served snapshot's feeds: per saved interest, how many new papers match",
             responses=_errors(400, 503))
    def feeds_index() -> dict[str, Any]:
        from urllib.parse import quote

        from pipeline.feeds.write import read_index

        cur = opened()
        index = read_index(cur.searcher.snap.path)
        out = {"snapshot_id": cur.snapshot_id, "previous_snapshot_id": index.get("previous_snapshot_id"),
               "new_papers": index.get("new_papers", 0), "feeds": {}}
        for name, f in index.get("feeds", {}).items():
            out["feeds"][name] = {k: v for k, v in f.items() if k != "files"}
            out["feeds"][name]["links"] = {fmt: f"/api/feeds/{quote(name)}?format={fmt}" for fmt in ("json", "atom", "md", "html")}
        return out

    @app.get("/api/feeds/{name}", summary="One feed: the new papers of the served snapshot that match a saved interest",
             responses={**FEED_RESPONSES, **_errors(400, 404, 422, 503)})
    def feed(
        name: str = Path_(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="the interest's name"),
        format: FEED_FORMATS = Query("json", description="json (JSON Feed 1.1) | atom | md | html | bibtex | ris | csl-json"),
    ) -> Response:
        from pipeline.feeds import write as feeds_mod

        cur = opened()
        path = cur.searcher.snap.path
        if name not in feeds_mod.read_index(path).get("feeds", {}):
            raise HTTPException(status_code=404, detail=f"no feed {name!r} in snapshot {cur.snapshot_id}")
        if format in feeds_mod.FORMATS:
            f = feeds_mod.feed_file(path, name, format)
            return Response(content=f.read_bytes(), media_type=feeds_mod.FORMATS[format][1])
        ids = feeds_mod.item_ids(feeds_mod.read_feed(path, name))
        if not ids:
            raise HTTPException(status_code=404, detail=f"feed {name!r} lists no paper in snapshot {cur.snapshot_id}")
        return _export_response(cur.searcher.snap, ids, format, name)

    @app.get("/feeds", include_in_schema=False)
    def feeds_page() -> FileResponse:
        return FileResponse(STATIC / "feeds.html")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/paper", include_in_schema=False)
    def paper_page() -> FileResponse:
        return FileResponse(STATIC / "paper.html")

    @app.get("/work", include_in_schema=False)
    def work_page() -> FileResponse:
        return FileResponse(STATIC / "work.html")

    @app.get("/author", include_in_schema=False)
    def author_page() -> FileResponse:
        return FileResponse(STATIC / "author.html")

    @app.get("/papers", include_in_schema=False)
    def papers_page() -> FileResponse:
        return FileResponse(STATIC / "papers.html")

    @app.get("/recommend", include_in_schema=False)
    def recommend_page() -> FileResponse:
        return FileResponse(STATIC / "recommend.html")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> FileResponse:
        return FileResponse(STATIC / "docs.html")

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> FileResponse:
        return FileResponse(STATIC / "redoc.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def warm_up(holder: Any) -> None:
    """Open the served snapshot and run one query (loads the query model, the resident vectors, the
    BM25 index), so that the first real search is as fast as the tenth. Nothing published yet: the
    server still starts and answers 503 until there is."""
    from pipeline.errors import UserError as _UserError

    t0 = time.perf_counter()
    try:
        cur = holder.get()
        cur.searcher.search("warm up", k=1, expand="rm3")  # the default offline path: first pass + feedback
    except _UserError as exc:
        log.warning("nothing to warm up: %s", exc)
        return
    log.info("snapshot %s loaded and warm in %.1fs", cur.snapshot_id, time.perf_counter() - t0)


def create_app_from_env() -> FastAPI:
    """App factory for multi-process serving (``paperkb serve --workers N``): each worker process
    builds its own app from the environment (``PAPERKB_*``, ``PAPERKB_SERVE_SNAPSHOT`` pins an id)."""
    return create_app(Settings.load(), os.environ.get("PAPERKB_SERVE_SNAPSHOT") or None)


def _json(content: Any) -> Response:
    """``content`` as the bytes FastAPI's JSONResponse writes for it, without its per-request work.

    An endpoint annotated ``-> dict[str, Any]`` that returns a dict has FastAPI validate it against that
    annotation and walk it through ``jsonable_encoder`` before ``json.dumps``: for a search answer (10
    results of ~15 fields and 10 signals each) that was a measurable part of a request's CPU. Content
    made of str, int, float, bool, None, lists and dicts needs neither; the body and headers are the same.
    """
    import json

    body = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")
    return Response(content=body, media_type="application/json")


def _export_response(snap, ids: list[str], fmt: str, stem: str) -> Response:
    """``ids`` rendered in ``fmt``, as a download named after ``stem``."""
    from pipeline.exports import FORMATS, filename
    from pipeline.query.records import export_text

    text = export_text(snap, ids, fmt)
    return Response(content=text, media_type=FORMATS[fmt][0],
                    headers={"Content-Disposition": f'attachment; filename="{filename(fmt, stem)}"'})


def _asdict(x: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(x)


def _paper_view(d: dict[str, Any]) -> dict[str, Any]:
    """One flat JSON object per paper: its metadata plus abstract, figures and metrics."""
    flat = dict(d.get("paper") or {})
    flat.update({k: v for k, v in d.items() if k != "paper"})
    return flat


def _edges(searcher, center: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CCBC edges among the drawn papers: center -> each related paper, plus the related pairs among the
    related papers themselves (:func:`pipeline.query.related.edges_among`)."""
    from pipeline.query.related import edges_among

    ids = [it.get("paper_id") or it.get("work_id") for it in items]
    edges = [{"source": center, "target": i, "weight": float(it.get("ccbc_weighted") or 0.0)}
             for i, it in zip(ids, items) if i]
    if not ids:
        return edges
    con = searcher.snap.catalog()
    try:
        edges.extend({"source": a, "target": b, "weight": w} for a, b, w in edges_among(con, [i for i in ids if i]))
    finally:
        con.close()
    return edges
