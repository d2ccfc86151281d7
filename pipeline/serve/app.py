"""FastAPI app: a read-only HTTP API and a search page over the CURRENT snapshot.

Endpoints (all GET; nothing writes):

    /api/health                       status and the snapshot being served
    /api/search?q=...                 ranked papers with their signals and the queries used
    /api/papers/{paper_id}            metadata, abstract, figure legends, metrics
    /api/papers/{paper_id}/related    connected papers, plus the graph among them
    /api/snapshots                    published snapshots and which one is CURRENT
    /api/export?id=...&format=...     papers as BibTeX, RIS or CSL-JSON (also format= on search and related)
    /api/path?from=...&to=...         the shortest citation paths between two papers
    /                                 the search page (static HTML + JS, no CDN)
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from pipeline.errors import DamagedSnapshot, UnknownPaper, UserError
from pipeline.serve.holder import SnapshotHolder
from pipeline.settings import Settings

log = logging.getLogger(__name__)
STATIC = Path(__file__).resolve().parent / "static"
MAX_QUERY_CHARS = 1000
MAX_K = 100
EXPORT_FORMATS = Literal["bibtex", "ris", "csl-json"]
# OpenAPI: what an export answers (the media types of pipeline.exports.FORMATS)
EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"content": {
    "application/x-bibtex": {"schema": {"type": "string"}},
    "application/x-research-info-systems": {"schema": {"type": "string"}},
    "application/vnd.citationstyles.csl+json": {"schema": {"type": "array", "items": {"type": "object"}}},
}, "description": "JSON, or with `format` the papers as BibTeX, RIS or CSL-JSON"}}


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out


def create_app(settings: Settings, snapshot_id: str | None = None) -> FastAPI:
    holder = SnapshotHolder(settings, pinned=snapshot_id)
    # Searching is CPU-bound (query encoding, LanceDB, numpy). Letting every HTTP thread search at
    # once only makes them fight for the cores; a few at a time gives more requests/s. The rest wait
    # in the executor's first-in-first-out queue (a semaphore lets late arrivals barge ahead, which
    # stretched the p95), so a request waits for at most the searches queued before it.
    searching = ThreadPoolExecutor(max_workers=settings.serve_concurrency or os.cpu_count() or 1,
                                   thread_name_prefix="paperkb-serve-search")

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        try:  # open (and pin) the snapshot at start, not at the first request: retention must see the pin
            holder.get()
        except UserError as exc:
            log.warning("no snapshot to serve yet: %s", exc)
        yield
        holder.close()  # unpin

    app = FastAPI(
        lifespan=lifespan,
        title="paperkb",
        version="1",
        description="Read-only search over a published paperkb snapshot: hybrid BM25 + vector search "
        "with the five-signal score, paper details and connected papers.",
    )
    app.state.holder = holder

    @app.exception_handler(UnknownPaper)
    async def _unknown(_: Request, exc: UnknownPaper) -> JSONResponse:
        return JSONResponse(status_code=404, content={"detail": str(exc)})

    @app.exception_handler(UserError)
    async def _user(_: Request, exc: UserError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(DamagedSnapshot)
    async def _damaged(_: Request, exc: DamagedSnapshot) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    def _snapshot_problem() -> str | None:
        """One line when the served snapshot is gone or damaged (stat only), else None."""
        from pipeline.serve.holder import gone_error

        cur = holder.served
        if cur is None:
            return None
        if cur.gone():
            return str(gone_error(cur.snapshot_id))
        problems = cur.searcher.snap.check()
        return str(DamagedSnapshot(cur.snapshot_id, problems)) if problems else None

    # LanceDB and the filesystem fail with these when files vanish from under a reader: 503 with one
    # line when the snapshot is to blame, else the error stands (500)
    @app.exception_handler(RuntimeError)
    @app.exception_handler(OSError)
    async def _io(_: Request, exc: Exception) -> JSONResponse:
        problem = _snapshot_problem()
        if problem is None:
            raise exc
        log.warning("%s (%s)", problem, str(exc).splitlines()[0][:200])
        return JSONResponse(status_code=503, content={"detail": problem})

    def opened():
        try:
            return holder.get()
        except DamagedSnapshot:
            raise  # 503 with its own line
        except UserError as exc:
            raise HTTPException(status_code=503, detail=f"no snapshot to serve: {exc}") from exc

    @app.get("/api/health", summary="Service status and the snapshot being served")
    def health() -> Any:
        try:
            cur = holder.get()
        except UserError as exc:
            problem = str(exc) if isinstance(exc, DamagedSnapshot) else f"no snapshot to serve: {exc}"
        else:
            problem = _snapshot_problem()  # every listed file stat'ed: gone or damaged is not "ok"
        if problem is not None:
            served = holder.served
            return JSONResponse(status_code=503, content={
                "status": "unavailable", "snapshot_id": served.snapshot_id if served else None, "detail": problem})
        return {"status": "ok", "snapshot_id": cur.snapshot_id}

    @app.get("/api/search", summary="Hybrid search: ranked papers with their five signals", responses=EXPORT_RESPONSES)
    async def search(
        q: str = Query(..., description="the query", min_length=1, max_length=MAX_QUERY_CHARS),
        k: int = Query(10, ge=1, le=MAX_K, description="number of papers"),
        fusion: Literal["blend", "interleave", "rrf"] = Query("blend"),
        expand: Literal["off", "rm3", "prf", "llm", "auto"] | None = Query(
            None, description="query expansion (default: the server's setting: the LLM when configured, else rm3)"),
        rerank: bool = Query(False, description="cross-encoder rerank of the top candidates"),
        title_boost: bool = Query(False, description="title-match boosts"),
        year_from: int | None = Query(None, ge=0, le=3000),
        year_to: int | None = Query(None, ge=0, le=3000),
        category: list[str] | None = Query(None, max_length=50, description="categories (repeat or comma-separate)"),
        author: list[str] | None = Query(None, max_length=50, description="author names (repeat or comma-separate)"),
        format: EXPORT_FORMATS | None = Query(None, description="answer with the results as bibtex, ris or csl-json instead of JSON"),
    ) -> dict[str, Any]:
        if not q.strip():
            raise HTTPException(status_code=400, detail="the query is empty")
        if year_from is not None and year_to is not None and year_from > year_to:
            raise HTTPException(status_code=400, detail=f"year_from {year_from} is after year_to {year_to}")
        from pipeline.query import Filters

        filters = Filters(year_from=year_from, year_to=year_to, categories=_split(category), authors=_split(author))

        def run():
            cur = opened()
            return cur, cur.searcher.search(q, k=k, filters=filters, fusion=fusion, expand=expand, rerank=rerank,
                                            title_boost=title_boost)

        cur, resp = await asyncio.get_running_loop().run_in_executor(searching, run)
        if format:
            return _export_response(cur.searcher.snap, [r.paper_id for r in resp.results], format, "search")
        return {
            "snapshot_id": cur.snapshot_id,
            "query": q,
            "queries": list(resp.queries),
            "notes": list(resp.notes),
            "results": [r.to_dict() for r in resp.results],
        }

    @app.get("/api/papers/{paper_id:path}/related", summary="Connected papers and the graph among them",
             responses=EXPORT_RESPONSES)
    def related(paper_id: str, k: int = Query(20, ge=1, le=MAX_K),
                format: EXPORT_FORMATS | None = Query(None, description="answer with the related papers as bibtex, ris or csl-json instead of JSON"),
                ) -> dict[str, Any]:
        cur = opened()
        center = _paper_view(cur.searcher.paper(paper_id))
        items = [r.to_dict() for r in cur.searcher.related(paper_id, k=k)]
        if format:
            return _export_response(cur.searcher.snap, [r["paper_id"] or r["work_id"] for r in items], format, "related")
        return {"snapshot_id": cur.snapshot_id, "paper": center, "related": items,
                "edges": _edges(cur.path, paper_id, items)}

    @app.get("/api/papers/{paper_id:path}", summary="Paper metadata, abstract, figure legends and metrics")
    def paper(paper_id: str) -> dict[str, Any]:
        cur = opened()
        return {"snapshot_id": cur.snapshot_id, **_paper_view(cur.searcher.paper(paper_id))}

    @app.get("/api/snapshots", summary="Published snapshots, the one CURRENT names and the one being served")
    def list_snapshots() -> dict[str, Any]:
        from pipeline import snapshots

        items = snapshots.list_snapshots(settings.snapshots_dir)
        ids = {s["snapshot_id"] for s in items}
        try:  # the served one, when it still exists (a deleted id is never called current or served)
            serving = holder.get().snapshot_id
        except UserError:
            serving = None
        current = snapshots.current_id(settings.snapshots_dir)
        return {"current": current if current in ids else None, "serving": serving if serving in ids else None,
                "snapshots": [s if isinstance(s, dict) else getattr(s, "to_dict", lambda: s)() for s in items]}

    @app.get("/api/export", summary="Papers as BibTeX, RIS or CSL-JSON for a reference manager", responses=EXPORT_RESPONSES)
    def export(
        id: list[str] = Query(..., min_length=1, max_length=MAX_K, description="paper ids (repeat or comma-separate)"),
        format: EXPORT_FORMATS = Query("bibtex", description="bibtex | ris | csl-json"),
    ) -> Response:
        ids = _split(id)
        if not ids:
            raise HTTPException(status_code=400, detail="no paper ids given")
        if len(ids) > MAX_K:
            raise HTTPException(status_code=400, detail=f"{len(ids)} paper ids; the limit is {MAX_K}")
        return _export_response(opened().searcher.snap, ids, format, ids[0] if len(ids) == 1 else "papers")

    @app.get("/api/path", summary="The shortest citation paths between two papers (citations followed either way)")
    def path(
        source: str = Query(..., alias="from", min_length=1, max_length=200, description="first paper id"),
        target: str = Query(..., alias="to", min_length=1, max_length=200, description="second paper id"),
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

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/paper", include_in_schema=False)
    def paper_page() -> FileResponse:
        return FileResponse(STATIC / "paper.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def create_app_from_env() -> FastAPI:
    """App factory for multi-process serving (``paperkb serve --workers N``): each worker process
    builds its own app from the environment (``PAPERKB_*``, ``PAPERKB_SERVE_SNAPSHOT`` pins an id)."""
    return create_app(Settings.load(), os.environ.get("PAPERKB_SERVE_SNAPSHOT") or None)


def _export_response(snap, ids: list[str], fmt: str, stem: str) -> Response:
    """``ids`` rendered in ``fmt``, as a download named after ``stem``."""
    from pipeline.exports import FORMATS, filename
    from pipeline.query.records import export_text

    text = export_text(snap, ids, fmt)
    return Response(content=text, media_type=FORMATS[fmt][0],
                    headers={"Content-Disposition": f'attachment; filename="{filename(fmt, stem)}"'})


def _paper_view(d: dict[str, Any]) -> dict[str, Any]:
    """One flat JSON object per paper: its metadata plus abstract, figures and metrics."""
    flat = dict(d.get("paper") or {})
    flat.update({k: v for k, v in d.items() if k != "paper"})
    return flat


def _edges(snapshot_path: Path, center: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CCBC edges among the drawn papers: center -> each related paper, plus related pairs
    among the related papers themselves where the snapshot's `related` table has them."""
    import duckdb

    ids = [it.get("paper_id") or it.get("work_id") for it in items]
    edges = [{"source": center, "target": i, "weight": float(it.get("ccbc_weighted") or 0.0)}
             for i, it in zip(ids, items) if i]
    catalog = snapshot_path / "catalog.duckdb"
    if not catalog.exists() or not ids:
        return edges
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        has = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'related'").fetchone()[0]
        if not has:
            return edges
        cols = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'related'").fetchall()}
        target = "related_paper_id" if "related_paper_id" in cols else "related_work_id"
        rows = con.execute(
            f"SELECT paper_id, {target}, ccbc_weighted FROM related WHERE paper_id IN (SELECT unnest(?)) "
            f"AND {target} IN (SELECT unnest(?)) AND paper_id < {target}",
            [ids, ids],
        ).fetchall()
    finally:
        con.close()
    edges.extend({"source": a, "target": b, "weight": float(w or 0.0)} for a, b, w in rows)
    return edges
