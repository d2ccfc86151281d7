"""``paperkb mcp``: the MCP server over a published snapshot, on the official ``mcp`` SDK (``MCPServer``).

Tools (typed input and output schemas; read-only): ``search``, ``get_paper``, ``get_passages``,
``get_citations``, ``related``, ``recommend``, ``citation_path``, ``export``; the served snapshot's manifest
is the resource ``paperkb://snapshot/manifest``. Every answer names its ``snapshot_id``.

The snapshot is held like ``paperkb serve`` holds it (:class:`pipeline.serve.holder.SnapshotHolder`):
pinned while served, following ``CURRENT`` (the next call after a publish answers from the new
snapshot) unless an id is pinned. The snapshot and the query model are loaded, and one query run,
before the first request is read (the server's lifespan).

Errors: arguments outside a tool's input schema, an unknown paper id, a selection that matches nothing,
a snapshot gone or damaged: a tool error (``isError``, one line saying what was wrong), and the server
goes on answering. Searches run in worker threads, at most ``serve_concurrency`` at a time (the cores).

Transports: stdio (an agent host starts ``paperkb mcp`` and speaks over its stdin/stdout; the SDK moves
anything else written to stdout onto stderr) and streamable HTTP (``/mcp``), which answers only the Host
names of ``serve_allowed_hosts`` (the rule and the middleware of ``paperkb serve``) and refuses a
browser Origin whose host is not among them.
"""

import json
import os
from contextlib import asynccontextmanager
from functools import partial
from typing import Annotated, Any, Callable, Literal, TypeVar
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from pipeline.agents import answers, tools
from pipeline.agents.catalogs import Catalogs
from pipeline.errors import DamagedSnapshot, UserError
from pipeline.serve.holder import SnapshotHolder
from pipeline.settings import Settings

NAME = "paperkb"
MANIFEST_URI = "paperkb://snapshot/manifest"
HTTP_PATH = "/mcp"
MAX_K = 100
MAX_IDS = 100
MAX_OFFSET = 100_000  # paging (get_passages, get_citations): the HTTP API's bound (pipeline.serve.app.MAX_OFFSET)
INSTRUCTIONS = (
    "Offline search over a published paperkb snapshot of scientific papers (full-text passages with their pages "
    "and sections, the citation graph). Start with `search`; read a paper with `get_paper` and its text with "
    "`get_passages` (by section or page range); follow the literature with `get_citations`, `related`, "
    "`recommend` and `citation_path`; cite with `export`. Paper ids come from the answers (e.g. an arXiv id or "
    "'cisi:12'). Every answer names the snapshot it was read from."
)

# Input types: the rules the schemas state (and the SDK enforces before a tool runs)
PaperId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S",
                               description="a paper id from an answer: the corpus id (e.g. 'cisi:12', an arXiv id) or "
                                           "its unambiguous external id; export and citation_path also take a "
                                           "citation-graph work id. Also what people paste: 'arXiv:1706.03762', "
                                           "'1706.03762v5', an arXiv or doi.org address, a DOI, an exact title")]
IdItem = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]
IdList = Annotated[list[IdItem], Field(min_length=1, max_length=MAX_IDS)]
Year = Annotated[int, Field(ge=1000, le=3000)] | None
FilterValues = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=50)]
Section = Annotated[str, Field(max_length=200)] | None
ExportFormat = Literal["bibtex", "ris", "csl-json"]

# What each tool does, as the agent reads it (tools/list)
DESCRIPTIONS = {
    "search": "Hybrid search (BM25 + vectors over full-text passages, citation signals): the best papers for a "
              "query, each with its best passage (page, section, role) and the signals of its score; and the works "
              "outside the corpus whose title the query names, among those the results cite (get_work reads them).",
    "get_paper": "A paper's metadata (title, authors and affiliations, year, DOI, venue, links), abstract, the "
                 "sections of its full text with their pages, figure legends, graph metrics, and how many papers it "
                 "cites and are citing it.",
    "get_work": "A work the papers cite that is not in the corpus (a reference's work_id, its arXiv id or DOI): what "
                "the citing papers' reference lists print of it (each entry with its page), how many cite it, and the "
                "works cited together with it by the most of them (co-citation).",
    "get_passages": "A paper's text as the search indexes it, in reading order: its abstract and full-text passages "
                    "with their section and pages; all of them, one section's, or those on a range of pages.",
    "get_citations": "The papers a paper cites (its printed bibliography in order, then the citation edges no printed "
                     "entry gave) or the papers citing it, each with its ids, authors, year and links.",
    "related": "Connected papers: co-citation and bibliographic coupling fused with semantic similarity, re-ranked "
               "by quality.",
    "recommend": "Papers like the positive seeds and unlike the negative ones (vectors and citation evidence), each "
                 "with why.",
    "citation_path": "The shortest citation paths between two papers (citations followed either way), each hop's "
                     "paper shown.",
    "export": "Papers as BibTeX, RIS or CSL-JSON, for a reference manager or a bibliography.",
    "ask": "A question answered from the snapshot: the best passage of each top paper as numbered evidence (paper, "
           "page, section); where the server has an LLM configured, also an answer whose every sentence cites the "
           "evidence (sentences citing nothing listed are dropped).",
}
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
T = TypeVar("T")


def validation_line(exc: ValidationError) -> str:
    """pydantic's errors as one line: ``k: Input should be less than or equal to 100``."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(x) for x in e.get("loc", ()))
        parts.append(f"{where}: {e.get('msg', 'is invalid')}" if where else str(e.get("msg", "invalid arguments")))
    return "; ".join(parts) or "invalid arguments"


class _Server(MCPServer):
    """MCPServer whose argument errors are one line naming the argument (the SDK's span several lines,
    with a link to pydantic's documentation)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"invalid arguments for {name}: {validation_line(exc.__cause__)}") from exc.__cause__
            raise


def build_server(settings: Settings, snapshot_id: str | None = None) -> MCPServer:
    """The MCP server over ``settings``' snapshots: ``snapshot_id`` pinned, else following CURRENT."""
    from pipeline.serve.multi_holder import MultiHolder, split_specs

    specs = split_specs(getattr(settings, "serve_snapshots", None))
    multi = MultiHolder(settings, specs) if len(specs) > 1 else None  # search spans them; the rest reads the first
    holder = multi.primary if multi is not None else SnapshotHolder(settings, pinned=snapshot_id, who="paperkb mcp")
    catalogs = Catalogs()
    concurrency = settings.serve_concurrency or os.cpu_count() or 1
    limiter: list[anyio.CapacityLimiter] = []  # made in the event loop, on first use
    max_query = min(1000, settings.query_max_chars)

    @asynccontextmanager
    async def lifespan(_: MCPServer):
        from pipeline.serve.app import warm_up

        await anyio.to_thread.run_sync(warm_up, multi or holder)  # snapshot, model, one query: before the first request
        try:
            yield {}
        finally:
            catalogs.close()
            (multi or holder).close()  # unpin

    server = _Server(NAME, title="paperkb", version=_version(), instructions=INSTRUCTIONS, lifespan=lifespan,
                     log_level="WARNING")

    def problem_of_served() -> str | None:
        """One line when the served snapshot is gone or damaged (stat only), else None."""
        from pipeline.serve.holder import gone_error

        cur = holder.served
        if cur is None:
            return None
        if cur.gone():
            return str(gone_error(cur.snapshot_id))
        problems = cur.searcher.snap.check()
        return str(DamagedSnapshot(cur.snapshot_id, problems)) if problems else None

    def answer(fn: Callable[[Any], T], error: type[Exception]) -> T:
        try:
            cur = holder.get()
            served = tools.Served(cur.snapshot_id, cur.searcher, lambda: catalogs.cursor(cur.searcher.snap))
            if multi is not None:
                m = multi.get()
                served.multi = m.searcher
                served.catalogs = {n: partial(catalogs.cursor, o.searcher.snap) for n, o in zip(m.names, m.opened)}
            return fn(served)
        except UserError as exc:  # an unknown paper, a bad selection, no snapshot, a damaged one
            line = str(exc) if isinstance(exc, DamagedSnapshot) or holder.served else f"no snapshot to serve: {exc}"
            raise error(line) from None
        except (OSError, RuntimeError) as exc:  # files vanished from under a reader: say so when that is why
            problem = problem_of_served()
            if problem is None:
                raise
            raise error(problem) from exc

    async def run(fn: Callable[[Any], T], error: type[Exception] = ToolError) -> T:
        """``fn(served snapshot)`` in a worker thread (at most ``concurrency`` at a time); the query layer's
        errors as ``error`` (a tool error, or a resource error for a resource)."""
        if not limiter:
            limiter.append(anyio.CapacityLimiter(concurrency))
        return await anyio.to_thread.run_sync(answer, fn, error, limiter=limiter[0])

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["search"])
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=max_query, pattern=r"\S", description="what to look for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="number of papers")] = 10,
        year_from: Annotated[Year, Field(description="only papers from this year on")] = None,
        year_to: Annotated[Year, Field(description="only papers up to this year")] = None,
        categories: Annotated[FilterValues, Field(description="only papers in one of these categories (e.g. cs.CL)")] = [],
        authors: Annotated[FilterValues, Field(description="only papers with an author name containing one of these")] = [],
        expand: Annotated[Literal["off", "rm3", "prf", "llm", "auto"] | None,
                          Field(description="query expansion (default: the server's setting, rm3 unless an LLM is "
                                            "configured)")] = None,
    ) -> answers.SearchAnswer:
        if year_from is not None and year_to is not None and year_from > year_to:
            raise ToolError(f"year_from {year_from} is after year_to {year_to}")
        return await run(lambda cur: tools.search(cur, query, k=k, year_from=year_from, year_to=year_to,
                                                  categories=categories, authors=authors, expand=expand))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["get_paper"])
    async def get_paper(paper_id: PaperId) -> answers.PaperAnswer:
        return await run(lambda cur: tools.get_paper(cur, paper_id))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["get_work"])
    async def get_work(work_id: PaperId,
                       top: Annotated[int, Field(ge=1, le=200, description="at most this many printed entries and "
                                                                           "works cited with it")] = 10,
                       ) -> answers.WorkAnswer:
        return await run(lambda cur: tools.get_work(cur, work_id, top=top))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["get_passages"])
    async def get_passages(
        paper_id: PaperId,
        section: Annotated[Section, Field(description="only passages whose section heading contains this "
                                                      "(case-insensitive; 'abstract' for the abstract)")] = None,
        page_from: Annotated[int | None, Field(ge=1, description="only passages on this PDF page or later")] = None,
        page_to: Annotated[int | None, Field(ge=1, description="only passages on this PDF page or earlier")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="at most this many passages")] = 50,
        offset: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="skip this many (to page through `total`)")] = 0,
    ) -> answers.PassagesAnswer:
        return await run(lambda cur: tools.get_passages(cur, paper_id, section=section, page_from=page_from,
                                                        page_to=page_to, limit=limit, offset=offset))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["get_citations"])
    async def get_citations(
        paper_id: PaperId,
        direction: Annotated[Literal["references", "cited_by"],
                             Field(description="references: the papers it cites; cited_by: the papers citing it")] = "references",
        sort: Annotated[Literal["order", "citations", "year", "mentions"] | None,
                        Field(description="order (as printed; the default for references), citations (most cited first; "
                                          "the default for cited_by), year (newest first) or, for references, "
                                          "mentions (the most cited in the paper's own text first)")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="at most this many papers")] = 20,
        offset: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="skip this many (to page through `total`)")] = 0,
    ) -> answers.CitationsAnswer:
        return await run(lambda cur: tools.get_citations(cur, paper_id, direction, limit=limit, offset=offset, sort=sort))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["related"])
    async def related(paper_id: PaperId,
                      k: Annotated[int, Field(ge=1, le=MAX_K, description="number of papers")] = 20) -> answers.RelatedAnswer:
        return await run(lambda cur: tools.related(cur, paper_id, k=k))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["recommend"])
    async def recommend(
        positive: Annotated[IdList, Field(description="paper ids to find more papers like")],
        negative: Annotated[list[IdItem], Field(max_length=MAX_IDS, description="paper ids to steer away from")] = [],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="number of papers")] = 20,
    ) -> answers.RecommendAnswer:
        return await run(lambda cur: tools.recommend(cur, positive, negative, k=k))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["citation_path"])
    async def citation_path(
        source: PaperId, target: PaperId,
        max_length: Annotated[int, Field(ge=1, le=8, description="longest path to look for, in citation hops")] = 4,
        limit: Annotated[int, Field(ge=1, le=200, description="at most this many shortest paths")] = 20,
    ) -> answers.PathAnswer:
        return await run(lambda cur: tools.citation_path(cur, source, target, max_length=max_length, limit=limit))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["export"])
    async def export(
        paper_ids: Annotated[IdList, Field(description="the papers to export")],
        format: Annotated[ExportFormat, Field(description="bibtex, ris or csl-json")] = "bibtex",
    ) -> answers.ExportAnswer:
        return await run(lambda cur: tools.export(cur, paper_ids, format))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["ask"])
    async def ask(
        question: Annotated[str, Field(min_length=1, max_length=max_query, pattern=r"\S", description="the question")],
        k: Annotated[int, Field(ge=1, le=20, description="passages of evidence")] = 5,
        use_llm: Annotated[bool, Field(description="let the server's LLM (if configured) write a cited answer")] = True,
    ) -> answers.AskAnswer:
        return await run(lambda cur: tools.ask(cur, settings, question, k=k, use_llm=use_llm))

    @server.resource(MANIFEST_URI, name="snapshot-manifest", title="The served snapshot's manifest",
                     description="snapshot id, creation time, row counts, the embedding model, the score weights and "
                                 "the checksums of its files", mime_type="application/json")
    async def manifest() -> str:
        def read(cur) -> str:
            return json.dumps(tools.public_manifest(cur.searcher.snap.manifest), indent=1, ensure_ascii=False)

        return await run(read, ResourceError)

    return server


def http_app(server: MCPServer, settings: Settings):
    """The streamable-HTTP ASGI app at ``/mcp``, behind ``paperkb serve``'s Host rule (``serve_allowed_hosts``)."""
    from pipeline.serve.app import Guard

    # The SDK's own check knows exact host:port names only; serve's rule (wildcards, '*') replaces it.
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return Guard(OriginCheck(app, settings.serve_allowed_hosts), allowed_hosts=settings.serve_allowed_hosts)


class OriginCheck:
    """Refuses (403) a request whose ``Origin`` header names a host outside ``allowed_hosts``: a web page of
    another site must not drive the server from a visitor's browser. Requests without Origin (agents,
    command-line clients) pass."""

    def __init__(self, app, allowed_hosts: list[str]):
        self.app, self.allowed = app, list(allowed_hosts)

    async def __call__(self, scope, receive, send):
        from fastapi.responses import JSONResponse

        from pipeline.serve.app import host_allowed

        if scope["type"] == "http":
            origins = [v.decode("latin-1").strip() for k, v in scope.get("headers") or [] if k.lower() == b"origin"]
            for origin in origins:  # every one (a request has one; were there several, none may be foreign)
                try:
                    host = (urlsplit(origin).hostname or "") if origin and origin != "null" else ""
                except ValueError:  # "http://[::1": no host it names is served
                    host = ""
                if origin and not (host and host_allowed(host.lower(), self.allowed)):
                    detail = (f"origin {origin!r} is not served here: add its host to the setting "
                              "PAPERKB_SERVE_ALLOWED_HOSTS to serve it")
                    return await JSONResponse(status_code=403, content={"detail": detail})(scope, receive, send)
        await self.app(scope, receive, send)


def run_stdio(settings: Settings, snapshot_id: str | None = None) -> None:
    build_server(settings, snapshot_id).run("stdio")


def run_http(settings: Settings, snapshot_id: str | None, host: str, port: int) -> None:
    import uvicorn

    app = http_app(build_server(settings, snapshot_id), settings)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("paperkb")
    except PackageNotFoundError:
        return "0"
