"""The ``paperkb`` command.

``paperkb [--warehouse DIR] [-v] COMMAND``. Heavy imports live inside each command so ``--help`` is fast.
Every error ends as one line on stderr (``main`` and :func:`describe_error`): exit code 2 for user and
environment errors (``UserError``, files and permissions, a warehouse in use by another process, DuckDB
and LanceDB I/O, a damaged JSON file), 1 for a step that failed; ``-v`` adds the traceback.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from pipeline.errors import UserError
from pipeline.settings import Settings

app = typer.Typer(
    name="paperkb",
    help="Nightly arXiv + Semantic Scholar pipeline and hybrid search over published snapshots.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    warehouse: Optional[Path] = typer.Option(None, "--warehouse", help="Data root (env PAPERKB_WAREHOUSE, default ./warehouse)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
) -> None:
    global _VERBOSE
    _VERBOSE = verbose
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"warehouse": warehouse}


_VERBOSE = False  # -v: errors print their traceback before the one line


def get_settings(ctx: typer.Context, **overrides) -> Settings:
    """Settings from the environment, overridden by the global flags and the command's flags."""
    obj = ctx.find_root().obj or {}
    settings = Settings.load(warehouse=obj.get("warehouse"), **overrides)
    if settings.warehouse.exists() and not settings.warehouse.is_dir():
        flag = "--warehouse" if obj.get("warehouse") is not None else "PAPERKB_WAREHOUSE"
        raise UserError(f"the warehouse {settings.warehouse} is a file, not a directory: point {flag} at a directory "
                        "(a new one is created)")
    return settings


# ==== harvest (issue 2) ==========================================================================
def _split_categories(values: Optional[list[str]]) -> Optional[list[str]]:
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


@app.command()
def harvest(
    ctx: typer.Context,
    from_date: Optional[str] = typer.Option(None, "--from", help="Harvest records changed on or after this day (YYYY-MM-DD). Default: the stored watermark."),
    until_date: Optional[str] = typer.Option(None, "--until", help="... and on or before this day (YYYY-MM-DD)."),
    replay: bool = typer.Option(False, "--replay", help="Rebuild the tables from the raw zone only, without the network."),
    categories: Optional[list[str]] = typer.Option(None, "--categories", help="Categories to keep, comma-separated or repeated: cs.AI, cs (whole archive), * (all). Default: setting PAPERKB_CATEGORIES."),
) -> None:
    """Harvest arXiv metadata (OAI-PMH ListRecords) into the warehouse, resuming a killed harvest."""
    from pipeline.errors import StepFailed
    from pipeline.steps.harvest import run_harvest, summary_line

    settings = get_settings(ctx, categories=_split_categories(categories))
    try:
        summary = run_harvest(settings, from_date=from_date, until_date=until_date, replay=replay)
    except StepFailed as exc:
        typer.echo(f"paperkb: harvest stopped: {exc}", err=True)
        raise typer.Exit(1)
    typer.echo(summary_line(summary))


@app.command()
def lookup(
    ctx: typer.Context,
    ids: list[str] = typer.Argument(..., help="arXiv ids: 2104.12255, 2104.12255v1, astro-ph/0601001, arXiv:..."),
) -> None:
    """Fetch single papers by id through the arXiv API (for backfills) and load them."""
    from pipeline.errors import StepFailed
    from pipeline.steps.harvest import run_lookup, summary_line

    settings = get_settings(ctx)
    try:
        summary = run_lookup(settings, ids)
    except StepFailed as exc:
        typer.echo(f"paperkb: lookup stopped: {exc}", err=True)
        raise typer.Exit(1)
    typer.echo(summary_line(summary))


# ==== enrich (issue 3) ===========================================================================
@app.command()
def enrich(
    ctx: typer.Context,
    replay: bool = typer.Option(False, "--replay", help="Rebuild S2 tables from the raw zone only (no network)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Enrich at most N papers this run."),
    mode: Optional[str] = typer.Option(
        None, "--mode", help="batch (/paper/batch with the edge lists), per-paper (page every paper's edges) or "
        "datasets (S2 Datasets API files, then diffs; needs S2_API_KEY). Setting PAPERKB_S2_MODE, default batch."),
) -> None:
    """Semantic Scholar: S2 ids and counts on papers, works, citations (with isInfluential/intents), authors."""
    from pipeline.steps.enrich import one_line, run_enrich
    from pipeline.errors import StepFailed

    modes = ("batch", "per-paper", "datasets")
    if mode is not None and mode not in modes:
        raise UserError(f"--mode {mode!r} is not one of {', '.join(modes)}")
    settings = get_settings(ctx, **({"s2_mode": mode} if mode else {}))
    try:
        summary = run_enrich(settings, replay=replay, limit=limit)
    except StepFailed as exc:  # everything fetched is loaded and kept; the watermark did not move
        print(f"paperkb: enrich stopped: {exc}", file=sys.stderr)
        raise typer.Exit(1)
    typer.echo(one_line(summary))


# ==== fulltext (issue 4) =========================================================================
@app.command()
def fulltext(
    ctx: typer.Context,
    replay: bool = typer.Option(False, "--replay", help="Re-extract every PDF already in the raw zone, without the network."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Papers per batch (setting PAPERKB_FULLTEXT_BATCH_SIZE)."),
) -> None:
    """Download PDFs of papers without full text, extract body chunks, figure legends and abstracts."""
    from pipeline.steps.fulltext import run_fulltext, summary_line

    settings = get_settings(ctx)
    typer.echo(summary_line(run_fulltext(settings, replay=replay, batch_size=batch_size)))


@app.command()
def extract(
    ctx: typer.Context,
    pdf: Path = typer.Argument(..., help="A PDF file."),
    as_json: bool = typer.Option(False, "--json", help="Print everything as JSON (pages, sections, chunks, figures)."),
    paper_id: Optional[str] = typer.Option(None, "--paper-id", help="Id to put in chunk/figure ids (default: file name)."),
) -> None:
    """Show what the pipeline would store for one PDF: pages, sections, chunks, figure legends."""
    import json

    from pipeline.steps.fulltext import extract_file

    settings = get_settings(ctx)
    result = extract_file(settings, pdf, paper_id=paper_id)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=1))
        return
    typer.echo(f"{pdf.name}: {result.n_pages} pages, {len(result.body)} chars, {len(result.sections)} sections, "
               f"{len(result.chunks)} chunks, {len(result.figures)} figures, abstract {'found' if result.abstract else 'not found'}")
    for s in result.sections:
        typer.echo(f"  p{s['page']:<3} {s['title']}")
    for f in result.figures:
        typer.echo(f"  p{f.page:<3} {f.text[:110]}")


# ==== graph + collections (issue 5) ==============================================================
@app.command()
def graph(
    ctx: typer.Context,
    damping: Optional[float] = typer.Option(None, "--damping", help="PageRank damping (setting graph_damping, default 0.85)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", min=1, help="Related works per corpus paper (setting graph_top_k, default 50)."),
) -> None:
    """Citation graph: PageRank, power-law fit and weights, weighted CCBC related papers."""
    from pipeline.steps.graph import run_graph

    settings = get_settings(ctx, graph_damping=damping, graph_top_k=top_k)
    s = run_graph(settings)
    pl = s["powerlaw"]
    fit = (f"power law xmin={pl['xmin']:g} alpha={pl['alpha']:.3f} KS D={pl['ks_d']:.3f} "
           f"vs lognormal R={pl['loglikelihood_ratio']:.2f} p={pl['p_value']:.3g}") if pl["status"] == "ok" else f"power law: {pl['status']} (weights 1)"
    pdf = s.get("pdf_citations") or {}
    from_pdfs = (f" ({pdf.get('edges', 0)} from {pdf.get('references', 0)} PDF references, "
                 f"{pdf.get('corpus_edges', 0)} between corpus papers)") if pdf.get("references") else ""
    typer.echo(f"graph: {s['works']} works, {s['citations']} citations{from_pdfs}, {s['corpus_papers']} corpus papers -> "
               f"{s['metrics']} metrics, {s['related']} related; {fit}; run {s['run_id']}")


@app.command("import-collection")
def import_collection_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Collection folder (e.g. ../shared/data/collections/cacm) or its documents file."),
    fmt: str = typer.Option("smart", "--format", help="smart (CISI, Cranfield, CACM: .I/.T/.A/.W/.B/.X) or jsonl ({id, title, abstract, authors?, year?, references?})."),
    name: Optional[str] = typer.Option(None, "--name", help="Collection name: paper ids become NAME:DOCNO (default: the folder name, or the .jsonl file name)."),
) -> None:
    """Import a local corpus (SMART test collection or JSONL) as papers, works and citations."""
    from pipeline.sources.local_corpus import import_collection

    settings = get_settings(ctx)
    s = import_collection(settings, path, fmt=fmt, name=name)
    typer.echo(f"import-collection {s['collection']}: {s['papers']} papers, {s['authors']} authors, "
               f"{s['works']} works, {s['citations']} citations, {s['rejected']} rejected")


@app.command("import-pdfs")
def import_pdfs_cmd(
    ctx: typer.Context,
    folder: Path = typer.Argument(..., help="Folder of PDFs (sub-folders included; other files are ignored), one PDF "
                                   "file, or a library (.bib, .json CSL-JSON, .ris) whose entries point at PDFs."),
    lookup: bool = typer.Option(True, "--lookup/--no-lookup", help="Then ask the arXiv API for the arXiv papers, so "
                                "their authors, title and dates are arXiv's own (the PDF's stay when it cannot be reached)."),
) -> None:
    """Bring your own library: add local PDFs as papers (arXiv id from the side stamp or file name, else local:<sha256>).

    Title, abstract, version and category come from the PDF itself; from a library file, the entry's
    arXiv id, title, authors, year and DOI win. The bytes go to the raw zone like a download, so
    `paperkb fulltext` extracts them without the network. Unusable files, and library entries without a
    PDF or with a missing one, go to rejects (and each such entry is listed).
    """
    from pipeline.library.pdf_folder import entry_lines, import_pdfs, lookup_imported, summary_line

    settings = get_settings(ctx)
    s = import_pdfs(settings, folder)
    typer.echo(summary_line(s))
    for line in entry_lines(s):
        typer.echo(line)
    if lookup and (looked := lookup_imported(settings, s)) is not None:
        if "error" in looked:
            typer.echo(f"import-pdfs: arXiv metadata not fetched for {looked['requested']} papers (authors, titles and "
                       f"dates read from the PDFs stay; `paperkb lookup ID` later): {looked['error']}", err=True)
        else:
            typer.echo(f"import-pdfs: arXiv metadata for {looked.get('found', 0)} of {looked.get('requested', 0)} arXiv papers")


# ==== embed + publish + snapshots (issue 6) ======================================================
@app.command()
def embed(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="sentence-transformers model name or path (setting embed_model; default bundled all-MiniLM-L6-v2)."),
    query_model: Optional[str] = typer.Option(None, "--query-model", help="Separate query encoder for asymmetric models (setting embed_query_model)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Texts per encoder batch (setting embed_batch_size, default 64)."),
    device: Optional[str] = typer.Option(None, "--device", help="torch device: cpu, cuda, mps (setting embed_device)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="torch | onnx | openvino (setting embed_backend; default torch)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="fp32 | bf16 | fp16 | int8 (setting embed_precision; default by device and backend)."),
) -> None:
    """Encode new passages, abstracts and figure legends into LanceDB (incremental by content hash)."""
    from pipeline.steps.embed import run_embed

    settings = get_settings(ctx, embed_model=model, embed_query_model=query_model, embed_batch_size=batch_size,
                            embed_device=device, embed_backend=backend, embed_precision=precision)
    s = run_embed(settings)
    ch = s["changes"]
    typer.echo(f"embed: {s['passages']} passages, {s['papers']} papers, {s['figures']} figures in; "
               f"{s['encoded']} texts encoded with {s['model']} ({s['dim']}-d, {s.get('runtime', 'torch-fp32')}); "
               f"rows written {sum(c['inserted'] + c['updated'] for c in ch.values())}, "
               f"deleted {sum(c['deleted'] for c in ch.values())}; 0 rejected; {s['seconds']}s")


@app.command()
def publish(ctx: typer.Context) -> None:
    """Build, verify and publish an immutable snapshot, then point CURRENT at it."""
    from pipeline.steps.publish import run_publish

    settings = get_settings(ctx)
    s = run_publish(settings)
    c = s["counts"]
    typer.echo(f"publish: snapshot {s['snapshot_id']} is CURRENT ({c.get('lancedb.chunks', 0)} passages, "
               f"{c.get('lancedb.papers', 0)} papers, {s['bytes'] / 1e6:.1f} MB, {s['seconds']}s); "
               f"previous {s['previous'] or 'none'}; removed {len(s['removed'])} old"
               + "".join(f"; kept {k}: {why}" for k, why in (s.get("kept_pinned") or {}).items())
               + (f"; feeds failed: {', '.join(s['feeds_failed'])} (manifest feeds_failed)" if s.get("feeds_failed") else ""))


snapshots_app = typer.Typer(help="List, verify and roll back published snapshots.", no_args_is_help=True)
app.add_typer(snapshots_app, name="snapshots")


@snapshots_app.command("list")
def snapshots_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Published snapshots, oldest first; * marks CURRENT; status ok or damaged (what is wrong), and who pins it."""
    import json as _json

    from pipeline.snapshots import list_snapshots

    rows = list_snapshots(get_settings(ctx))
    if as_json:
        typer.echo(_json.dumps(rows, indent=1))
        return
    if not rows:
        typer.echo("no snapshots published yet (run `paperkb publish`)")
    for r in rows:
        c = r["counts"]
        size = f"{r['bytes'] / 1e6:.1f} MB" if r.get("bytes") else "?"
        status = f"damaged: {r['problems'][0]}" if r.get("problems") else "ok"
        pinned = f"  pinned by {'; '.join(r['pinned_by'])}" if r.get("pinned_by") else ""
        typer.echo(f"{'*' if r['current'] else ' '} {r['snapshot_id']}  {r['created_at'] or '?'}  "
                   f"{c.get('lancedb.papers', c.get('papers', 0))} papers  {c.get('lancedb.chunks', 0)} passages  "
                   f"{size}  {r['model']}  {status}{pinned}")


@snapshots_app.command("rollback")
def snapshots_rollback(ctx: typer.Context, snapshot_id: str = typer.Argument(..., help="Snapshot id to make CURRENT.")) -> None:
    """Point CURRENT at an earlier snapshot (verified by checksum first)."""
    from pipeline.snapshots import rollback

    r = rollback(get_settings(ctx), snapshot_id)
    typer.echo(f"rollback: CURRENT is {r['snapshot_id']} (was {r['previous'] or 'none'})")


@snapshots_app.command("verify")
def snapshots_verify(ctx: typer.Context, snapshot_id: Optional[str] = typer.Argument(None, help="Snapshot id (default CURRENT).")) -> None:
    """Re-hash every file of a snapshot against its manifest; exit 2 on any mismatch."""
    from pipeline.snapshots import read_manifest, resolve, verify

    settings = get_settings(ctx)
    path = resolve(settings, snapshot_id)
    problems = verify(settings, path=path)
    if problems:
        raise UserError(f"snapshot {path.name}: {len(problems)} problem(s): {'; '.join(problems[:3])}")
    typer.echo(f"verify: snapshot {path.name} intact ({len(read_manifest(path)['files'])} files)")


# ==== search, related, eval (issue 7) ============================================================
@app.command()
def search(
    ctx: typer.Context,
    query: Optional[str] = typer.Argument(None, help="The query (omit with --queries)."),
    k: int = typer.Option(10, "--k", "-k", help="Papers to return (per query with --queries)."),
    fusion: Optional[str] = typer.Option(None, "--fusion", help="blend | interleave | rrf (default: setting query_fusion, blend)."),
    expand: Optional[str] = typer.Option(None, "--expand", help="off | prf | rm3 | llm | auto (default: llm if configured, else rm3; auto: llm if configured, else prf)."),
    rerank: bool = typer.Option(False, "--rerank/--no-rerank", help="Cross-encoder rerank of the top candidates."),
    title_boost: Optional[bool] = typer.Option(None, "--title-boost/--no-title-boost", help="Title-match boosts."),
    config: Optional[str] = typer.Option(None, "--config", help="Scoring configuration: default | hybrid | seed | bm25 | dense | fusion."),
    year_from: Optional[int] = typer.Option(None, "--year-from", help="Only papers from this year on."),
    year_to: Optional[int] = typer.Option(None, "--year-to", help="Only papers up to this year."),
    category: Optional[list[str]] = typer.Option(None, "--category", help="Only these categories (repeat or comma-separate)."),
    author: Optional[list[str]] = typer.Option(None, "--author", help="Only papers with an author name containing this (repeatable)."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    queries: Optional[Path] = typer.Option(None, "--queries", help="Batch: queries file (qid<TAB>text TSV, SMART .QRY or TREC topics)."),
    run_out: Optional[Path] = typer.Option(None, "--run-out", help="Batch: write a TREC run here (qid Q0 docid rank score tag)."),
    tag: str = typer.Option("paperkb", "--tag", help="Run tag in the TREC run."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (everything, unabridged)."),
    wide: bool = typer.Option(False, "--wide", help="One column per signal (a table 220 columns wide); the default on "
                              "terminals of 150+ columns, else one wrapped cell per paper that fits 80 columns."),
    export_format: Optional[str] = typer.Option(None, "--format", help="Print the results for a reference manager: bibtex | ris | csl-json."),
) -> None:
    """Hybrid search of a published snapshot: ranked papers with their signals and the queries used."""
    import json as _json

    from pipeline.query import Filters, Searcher, open_snapshot

    settings = get_settings(ctx)
    if (query is None) == (queries is None):
        raise UserError("give either a QUERY or --queries FILE")
    if queries is not None and run_out is None:
        raise UserError("--queries needs --run-out RUN.trec")
    filters = Filters(year_from=year_from, year_to=year_to, categories=_split_categories(category) or [], authors=author or [])
    kwargs: dict[str, Any] = dict(filters=filters, fusion=fusion, expand=expand, rerank=rerank, title_boost=title_boost,
                                  config=config)
    searcher = Searcher(open_snapshot(settings, snapshot), settings)
    if queries is not None and run_out is not None:
        from pipeline.evaluation.qrels import read_queries
        from pipeline.query.runs import search_trec_run

        qs = read_queries(queries)
        n = search_trec_run(searcher, qs, run_out, k=k, tag=tag, **kwargs)
        typer.echo(f"search: {len(qs)} queries -> {n} lines in {run_out} (snapshot {searcher.snap.snapshot_id})")
        return
    _check_export_format(export_format)
    resp = searcher.search(query or "", k=k, **kwargs)
    if export_format:
        _print_export(searcher.snap, [r.paper_id for r in resp.results], export_format)
        return
    if as_json:
        print(_json.dumps(resp.to_dict(), indent=2, default=str))
        return
    from pipeline.query.display import print_search

    print_search(resp, wide=True if wide else None)


@app.command()
def related(
    ctx: typer.Context,
    paper_id: str = typer.Argument(..., help="Paper id (arXiv id, or '<collection>:<docno>')."),
    k: int = typer.Option(20, "--k", "-k", help="How many related papers."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    export_format: Optional[str] = typer.Option(None, "--format", help="Print the related papers for a reference manager: bibtex | ris | csl-json."),
    wide: bool = typer.Option(False, "--wide", help="One column per component (a table 220 columns wide); the default "
                              "on terminals of 150+ columns, else one wrapped cell per paper that fits 80 columns."),
) -> None:
    """Connected papers: weighted co-citation/coupling fused with semantic similarity, re-ranked by quality."""
    import json as _json

    from pipeline.query import Searcher, open_snapshot

    settings = get_settings(ctx)
    searcher = Searcher(open_snapshot(settings, snapshot), settings)
    _check_export_format(export_format)
    items = searcher.related(paper_id, k=k)
    if export_format:
        _print_export(searcher.snap, [r.paper_id or r.work_id for r in items], export_format)
        return
    if as_json:
        print(_json.dumps({"paper_id": searcher.resolve_id(paper_id), "snapshot_id": searcher.snap.snapshot_id,
                           "related": [r.to_dict() for r in items]}, indent=2, default=str))
        return
    from pipeline.query.display import print_related

    print_related(searcher, paper_id, items, wide=True if wide else None)


# ==== exports, library matching, citation paths (issue 15) =======================================
def _check_export_format(fmt: Optional[str]) -> Optional[str]:
    if fmt is None:
        return None
    from pipeline.exports import check_format

    try:
        return check_format(fmt)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _print_export(snap, ids: list[str], fmt: str, out: Optional[Path] = None) -> None:
    from pipeline.query.records import export_text

    text = export_text(snap, ids, fmt)
    if out is None:
        sys.stdout.write(text)
        return
    out.write_text(text, encoding="utf-8")
    typer.echo(f"export: {len(ids)} paper(s) as {fmt} -> {out}", err=True)


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    paper_ids: list[str] = typer.Argument(..., help="Paper ids (arXiv id, '<collection>:<docno>', or a citation-graph work id)."),
    export_format: str = typer.Option("bibtex", "--format", help="bibtex | ris | csl-json."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write to this file instead of standard output."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
) -> None:
    """Papers as BibTeX, RIS or CSL-JSON for a reference manager (Zotero, JabRef, EndNote, citeproc)."""
    from pipeline.query import open_snapshot

    fmt = _check_export_format(export_format) or "bibtex"
    _print_export(open_snapshot(get_settings(ctx), snapshot), paper_ids, fmt, out)


@app.command("match-library")
def match_library_cmd(
    ctx: typer.Context,
    library: Path = typer.Argument(..., help="A reference-manager export: .bib (BibTeX), .ris, or .json (CSL-JSON)."),
    library_format: Optional[str] = typer.Option(None, "--format", help="bibtex | ris | csl-json (default: from the file name or its content)."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id to match against (default: CURRENT)."),
    warehouse_db: bool = typer.Option(False, "--warehouse-db", help="Match against the working warehouse instead of a snapshot."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Match a library's entries to papers by DOI, arXiv id, then normalised title; list every unmatched entry."""
    import json as _json

    import duckdb

    from pipeline.library.match import match_library

    settings = get_settings(ctx)
    if warehouse_db:
        if snapshot:
            raise UserError("give either --snapshot or --warehouse-db")
        db = settings.warehouse / "warehouse.duckdb"
        if not db.is_file():
            raise UserError(f"no warehouse database at {db}")
        con, against = duckdb.connect(str(db), read_only=True), f"warehouse {db}"
    else:
        from pipeline.query import open_snapshot

        snap = open_snapshot(settings, snapshot)
        con, against = snap.catalog(), f"snapshot {snap.snapshot_id}"
    try:
        report = match_library(con, library, library_format)
    finally:
        con.close()
    if as_json:
        print(_json.dumps({"against": against, **report.to_dict()}, indent=1, ensure_ascii=False))
        return
    typer.echo(f"match-library {library.name} ({report.format}, {report.entries} entries) against {against}: "
               f"{len(report.matched)} matched, {len(report.unmatched)} unmatched")
    for m in report.matched:
        typer.echo(f"  matched   #{m.entry.index:<4} {m.entry.key or '-'} -> {m.paper_id} (by {m.by}) {m.title or ''}")
    for u in report.unmatched:
        typer.echo(f"  unmatched #{u.entry.index:<4} {u.entry.key or '-'}: {u.entry.title or '(no title)'} [{u.reason}]")
    for p in report.problems:
        typer.echo(f"  problem: {p}")


@app.command("path")
def path_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="First paper id."),
    target: str = typer.Argument(..., help="Second paper id."),
    max_length: int = typer.Option(4, "--max-length", min=1, max=8, help="Longest path to look for, in citation hops."),
    limit: int = typer.Option(20, "--limit", min=1, max=200, help="At most this many shortest paths."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The shortest citation paths between two papers, citations followed either way, each hop's paper shown."""
    import json as _json

    from pipeline.query import open_snapshot
    from pipeline.query.paths import shortest_paths

    snap = open_snapshot(get_settings(ctx), snapshot)
    con = snap.catalog()
    try:
        res = shortest_paths(con, source, target, max_length=max_length, limit=limit)
    finally:
        con.close()
    res.snapshot_id = snap.snapshot_id
    if as_json:
        print(_json.dumps(res.to_dict(), indent=1, ensure_ascii=False, default=str))
        return
    if res.length is None:
        typer.echo(f"path: no citation path of at most {max_length} hops between {res.source} and {res.target} "
                   f"(snapshot {snap.snapshot_id})")
        return
    more = " (more not shown: raise --limit)" if res.truncated else ""
    typer.echo(f"path: {len(res.paths)} shortest path(s) of {res.length} hop(s) between {res.source} and {res.target}{more}")
    for n, p in enumerate(res.paths, start=1):
        typer.echo(f"#{n}")
        for h in p:
            arrow = {"cites": "  cites  ", "cited_by": "cited by "}.get(h.link or "", "")
            typer.echo(f"  {arrow:>9} {h.paper_id or h.work_id}  {h.year or '----'}  {h.title or ''}")


@app.command("recommend")
def recommend_cmd(
    ctx: typer.Context,
    pos: list[str] = typer.Option(..., "--pos", help="Positive seed paper ids (repeat --pos, or comma-separate)."),
    neg: Optional[list[str]] = typer.Option(None, "--neg", help="Negative seed paper ids (repeat --neg, or comma-separate): push away from these."),
    k: int = typer.Option(20, "--k", "-k", min=1, max=1000, help="How many papers."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (every reason, with shared reference / citer ids)."),
    export_format: Optional[str] = typer.Option(None, "--format", help="Print the recommended papers for a reference manager: bibtex | ris | csl-json."),
) -> None:
    """Papers like the positive seeds and unlike the negative ones (vectors + co-citation/coupling), each with why."""
    import json as _json

    from pipeline.query import Searcher, open_snapshot

    settings = get_settings(ctx)
    _check_export_format(export_format)
    searcher = Searcher(open_snapshot(settings, snapshot), settings)
    resp = searcher.recommend(_split_categories(pos) or [], _split_categories(neg) or [], k=k)
    if export_format:
        _print_export(searcher.snap, [r.paper_id for r in resp.results], export_format)
        return
    if as_json:
        print(_json.dumps(resp.to_dict(), indent=1, ensure_ascii=False, default=str))
        return
    negs = f", away from {', '.join(resp.negatives)}" if resp.negatives else ""
    typer.echo(f"recommend: {len(resp.results)} paper(s) like {', '.join(resp.positives)}{negs} (snapshot {resp.snapshot_id})")
    for r in resp.results:
        typer.echo(f"{r.rank:>3}  {r.score:6.3f}  {r.paper_id}  {r.year or '----'}  {r.title or ''}")
        typer.echo(f"{'':13}why: {r.why() or '-'}")


# ==== interests and feeds (issue 15) ===============================================================
interests_app = typer.Typer(help="Saved searches and seed sets whose new papers each publish lists as feeds.", no_args_is_help=True)
app.add_typer(interests_app, name="interests")


@interests_app.command("add")
def interests_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Feed name: letters, digits, '.', '_', '-'."),
    query: Optional[str] = typer.Option(None, "--query", "-q", help="A saved search: new papers near this query."),
    seed: Optional[list[str]] = typer.Option(None, "--seed", help="A seed set: new papers like these (repeat --seed, or comma-separate)."),
    library: Optional[Path] = typer.Option(None, "--from", help="A seed set from a reference-manager export (.bib, .ris, CSL-JSON .json), "
                                           "matched by DOI, arXiv id, then title; unmatched entries are listed."),
    library_format: Optional[str] = typer.Option(None, "--library-format", help="bibtex | ris | csl-json (default: from the file)."),
    year_from: Optional[int] = typer.Option(None, "--year-from", help="Query interests: only papers from this year on."),
    year_to: Optional[int] = typer.Option(None, "--year-to", help="Query interests: only papers up to this year."),
    category: Optional[list[str]] = typer.Option(None, "--category", help="Query interests: only these categories."),
    author: Optional[list[str]] = typer.Option(None, "--author", help="Query interests: only papers with an author name containing this."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="Cosine similarity a new paper needs (default: setting "
                                              "feed_query_threshold 0.50 for a query, feed_seed_threshold 0.75 for seeds)."),
    replace: bool = typer.Option(False, "--replace", help="Replace an interest of the same name."),
) -> None:
    """Save an interest; from the next publish on, its snapshot holds a feed of the new papers that match it."""
    from pipeline.feeds.interests import add_interest
    from pipeline.query.filters import Filters

    filters = Filters(year_from=year_from, year_to=year_to, categories=_split_categories(category) or [], authors=author or [])
    it = add_interest(get_settings(ctx), name, query=query, filters=filters, seeds=_split_categories(seed),
                      library=library, library_format=library_format, threshold=threshold, replace=replace)
    typer.echo(f"interests: saved {it.name} ({it.describe()})")
    for u in it.unmatched:
        typer.echo(f"  unmatched #{u['index']:<4} {u['key'] or '-'}: {u['title'] or '(no title)'} [{u['reason']}]")


@interests_app.command("list")
def interests_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Saved interests, by name."""
    from pipeline.feeds.interests import list_interests

    items = list_interests(get_settings(ctx))
    if as_json:
        print(json.dumps([i.to_dict() for i in items], indent=1, ensure_ascii=False))
        return
    if not items:
        typer.echo("interests: none (add one with `paperkb interests add NAME --query TEXT | --seed ID | --from FILE`)")
    for i in items:
        th = f"threshold {i.threshold:.2f}" if i.threshold is not None else "default threshold"
        typer.echo(f"{i.name:<20} {i.kind:<6} {th:<18} {i.describe()}" + (f" ({len(i.unmatched)} unmatched)" if i.unmatched else ""))


@interests_app.command("remove")
def interests_remove(ctx: typer.Context, name: str = typer.Argument(..., help="Interest name.")) -> None:
    """Forget an interest (feeds already published stay in their snapshots)."""
    from pipeline.feeds.interests import remove_interest

    remove_interest(get_settings(ctx), name)
    typer.echo(f"interests: removed {name}")


FEED_PRINT_FORMATS = ("md", "atom", "json", "html", "bibtex", "ris", "csl-json")


@app.command("feeds")
def feeds_cmd(
    ctx: typer.Context,
    name: Optional[str] = typer.Argument(None, help="A feed (interest) name; omit to list the snapshot's feeds."),
    feed_format: str = typer.Option("md", "--format", help="md | atom | json (JSON Feed) | html, or the papers for a reference "
                                     "manager: bibtex | ris | csl-json."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    send: bool = typer.Option(False, "--send", help="Mail the snapshot's digest now (settings PAPERKB_FEED_SMTP_*, PAPERKB_FEED_MAIL_TO); "
                              "each recipient gets a snapshot's digest once."),
    as_json: bool = typer.Option(False, "--json", help="List as JSON (the feeds index)."),
) -> None:
    """The feeds a snapshot holds: the papers new in it that match each interest (Atom, JSON Feed, digest)."""
    from pipeline.feeds import write as feeds_mod
    from pipeline import snapshots

    settings = get_settings(ctx)
    if send:
        from pipeline.feeds.mail import deliver

        out = deliver(settings, snapshot)
        typer.echo(f"feeds: snapshot {out['snapshot_id']}: " + (f"mailed to {', '.join(out['sent_to'])}" if out["sent_to"]
                                                                else f"not mailed: {out['skipped']}"))
        return
    path = snapshots.resolve(settings.snapshots_dir, snapshot)
    if name is None:
        index = feeds_mod.read_index(path)
        if as_json:
            print(json.dumps(index, indent=1, ensure_ascii=False))
            return
        if not index:
            typer.echo(f"feeds: snapshot {path.name} has none (interests are added with `paperkb interests add`; "
                       "feeds appear from the next publish on)")
            return
        since = index.get("previous_snapshot_id") or "none (first snapshot)"
        typer.echo(f"feeds of snapshot {path.name}: {index['new_papers']} new paper(s) since {since}")
        for n, f in index["feeds"].items():
            typer.echo(f"{n:<20} {f['matched']:>4} matching  {f['description']}" + "".join(f"; {x}" for x in f.get("notes", []))
                       + "".join(f"; FAILED {k}: {v}" for k, v in (f.get("failed") or {}).items()))
        return
    if feed_format not in FEED_PRINT_FORMATS:
        raise UserError(f"unknown feed format {feed_format!r}: choose one of {', '.join(FEED_PRINT_FORMATS)}")
    if feed_format in feeds_mod.FORMATS:
        sys.stdout.write(feeds_mod.feed_file(path, name, feed_format).read_text(encoding="utf-8"))
        return
    from pipeline.query import open_snapshot

    ids = feeds_mod.item_ids(feeds_mod.read_feed(path, name))
    if not ids:
        typer.echo(f"feeds: {name} lists no paper in snapshot {path.name}", err=True)
        return
    _print_export(open_snapshot(settings, path.name), ids, feed_format)


# ==== eval (issue 7) =============================================================================
@app.command("eval")
def eval_cmd(
    ctx: typer.Context,
    queries: Path = typer.Option(..., "--queries", help="Queries: SMART (.QRY, cran.qry) or TREC (qid<TAB>text, or <top> topics)."),
    qrels: Path = typer.Option(..., "--qrels", help="Judgements: SMART (.REL, cranqrel) or TREC (qid 0 docid rel)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="smart | trec (default: detected from each file)."),
    with_ablations: bool = typer.Option(False, "--ablations", help="Also BM25/dense/fusion only, seed, each signal removed, expansion and title boosts on/off."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Where TREC runs + qrels go (default: WAREHOUSE/eval/SNAPSHOT)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """nDCG@10, MAP and R@100 (ir-measures) of the default ranking and its ablations, with TREC run files."""
    from pipeline.evaluation.evaluate import evaluate, relative_to, summary_json

    if fmt is not None and fmt not in ("smart", "trec"):
        raise UserError(f"unknown --format {fmt!r}: use smart or trec")
    settings = get_settings(ctx)
    def progress(done: int, total: int, name: str) -> None:
        print(f"[{done}/{total}] {name}", file=sys.stderr, flush=True)

    summary = evaluate(settings, queries, qrels, fmt=fmt, with_ablations=with_ablations, snapshot_id=snapshot,
                       run_dir=run_dir, progress=progress)
    if as_json:
        print(summary_json(summary))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"paperkb eval: snapshot {summary['snapshot_id']}, {summary['queries']} judged queries")
    table.add_column("configuration")
    for m in summary["measures"]:
        table.add_column("MAP" if m == "AP" else m, justify="right")
    table.add_column("s/query", justify="right")
    for row in summary["rows"]:
        vals = [f"{row['measures'][m]:.4f}" for m in summary["measures"]] if row["measures"] else ["-"] * len(summary["measures"])
        table.add_row(row["name"], *vals, f"{row['seconds'] / max(row['queries'], 1):.3f}" if row["queries"] else "-")
    console = Console(width=None if sys.stdout.isatty() else 120)  # piped: wide enough for one line per row
    console.print(table)
    for note in summary["notes"]:
        console.print(f"note: {note}")
    ratio = relative_to(summary)
    if ratio is not None:
        console.print(f"default / better of (bm25 only, dense only) nDCG@10 = {ratio:.3f}x")
    console.print(f"runs: {summary['run_dir']}")


# ==== refresh (issue 8) ==========================================================================
@app.command()
def refresh(
    ctx: typer.Context,
    from_date: Optional[str] = typer.Option(None, "--from", help="First day to harvest (YYYY-MM-DD); default: the harvest watermark."),
    until_date: Optional[str] = typer.Option(None, "--until", help="Last day to harvest, inclusive (YYYY-MM-DD); default: today."),
    replay: bool = typer.Option(False, "--replay", help="Rebuild arXiv and S2 tables from the raw zone only (no network)."),
) -> None:
    """All steps in order, in this process, as the nightly DAG runs them: harvest .. publish."""
    from pipeline.steps.refresh import STEP_ORDER, one_line, run_refresh
    from pipeline.dates import parse_day

    settings = get_settings(ctx)
    start, end = parse_day(from_date, "--from"), parse_day(until_date, "--until")
    if start and end and start > end:
        raise UserError(f"--from {start} is after --until {end}")

    def show(step: str, summary: dict, seconds: float) -> None:
        n = STEP_ORDER.index(step) + 1
        print(f"[{n}/{len(STEP_ORDER)}] {step} ({seconds:.1f}s): {one_line(summary)}", flush=True)

    result = run_refresh(settings, from_date=start, until_date=end, replay=replay, on_step=show)
    total = sum(result["seconds"].values())
    if result.get("not_published"):  # an empty source: a warning, exit 0, CURRENT untouched
        print(f"paperkb: warning: {result['not_published']}", file=sys.stderr)
        print(f"refresh: done in {total:.1f}s; nothing published")
        return
    print(f"refresh: done in {total:.1f}s; published snapshot {result.get('snapshot_id')}")


@app.command("dags-folder")
def dags_folder() -> None:
    """Print the folder of the installed DAG files and pools.json (for AIRFLOW__CORE__DAGS_FOLDER)."""
    from pipeline.settings import DAGS_DIR

    print(DAGS_DIR)


@app.command("replay-server")
def replay_server(
    data: Path = typer.Argument(..., help="The recorded data folder (arxiv/ and s2/ inside, e.g. shared/data)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (0.0.0.0: reachable from the other hosts)."),
    port: int = typer.Option(8765, min=0, max=65535, help="Port (0: any free one)."),
) -> None:
    """Serve the recorded arXiv/S2 answers; prints the `export PAPERKB_...` lines that point paperkb at it."""
    from pipeline.replay_server import serve_until_interrupted

    serve_until_interrupted(data, host, port, echo=lambda line: print(line, flush=True), started=lambda url: print(
        f"paperkb: replaying the recorded arXiv/S2 data in {data} at {url}; Ctrl-C stops", file=sys.stderr, flush=True))


# ==== serve (issue 9) ============================================================================


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback unless told otherwise)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Pin a snapshot id instead of following CURRENT."),
    workers: int = typer.Option(1, min=1, max=64, help="Server processes, each with its own copy of the model and in-memory vectors (CISI on 2 cores: 90 requests/s with 1, 120 with 2)."),
) -> None:
    """Serve the HTTP API and the search page over the published snapshot (read-only)."""
    import os

    import uvicorn

    from pipeline.query import open_snapshot
    from pipeline.serve import create_app
    from pipeline.serve.bind import check_listen

    settings = get_settings(ctx)
    check_listen(host, port)  # a port in use: one line, exit 2 (uvicorn would log it and exit 3)
    open_snapshot(settings, snapshot, pin=False)  # fail early, one line, when there is nothing (intact) to serve
    typer.echo(f"paperkb: serving {settings.snapshots_dir} on http://{host}:{port}/ (API docs at /docs) once the "
               "snapshot and the query model are loaded")
    try:
        if workers == 1:
            uvicorn.run(create_app(settings, snapshot), host=host, port=port, log_level="warning")
            return
        # Worker processes rebuild the app from the environment, so hand them the resolved settings.
        os.environ["PAPERKB_WAREHOUSE"] = str(settings.warehouse.resolve())
        os.environ["PAPERKB_SERVE_SNAPSHOT"] = snapshot or ""
        uvicorn.run("pipeline.serve.app:create_app_from_env", factory=True, host=host, port=port, workers=workers,
                    log_level="warning")
    except SystemExit as exc:  # uvicorn could not start: taken while the snapshot was loading?
        if exc.code in (0, None):
            raise
        check_listen(host, port)
        raise


# Top-level modules that only the optional install profiles bring (pyproject.toml): a base install
# (search and serve a snapshot) that runs a pipeline step is told which profile to add.
_PROFILE_OF_MODULE = {
    **dict.fromkeys(("requests", "tenacity", "lxml", "feedparser", "pylatexenc", "pymupdf", "fitz", "msgspec",
                     "igraph", "powerlaw", "scipy", "yaml"), "pipeline"),
    "airflow": "airflow",
}


def install_profile_of(module: str) -> str | None:
    """The install profile (extra) that provides ``module`` (``pymupdf.utils`` -> ``pipeline``), if any."""
    return _PROFILE_OF_MODULE.get(module.split(".")[0])


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _json_file_of(exc: BaseException) -> str | None:
    """The ``*.json`` path being read where ``exc`` was raised (a local of the frames), if any."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, (str, Path)) and str(value).endswith(".json"):
                found = str(value)
        tb = tb.tb_next
    return found


def _mro_names(exc: BaseException) -> set[str]:
    """``{"duckdb.IOException", "duckdb.Error", ...}``: the error's classes by package (``_duckdb`` -> ``duckdb``)."""
    return {f"{c.__module__.split('.')[0].lstrip('_')}.{c.__name__}" for c in type(exc).__mro__}


def _lance_line(msg: str) -> str:
    """``lance error: LanceError(IO): Read-only file system (os error 30) at path "...", ~/.cargo/...rs:1:2``
    -> ``LanceDB cannot write its files: Read-only file system (os error 30) at path "..."``."""
    text = re.sub(r"^lance error:\s*", "", msg, flags=re.I)
    text = re.sub(r"^LanceError\(\w+\):\s*", "", text)
    text = re.sub(r",\s*\S+\.rs:\d+:\d+\s*$", "", text)
    if re.search(r"read-only file system|permission denied|os error (13|30)\b", text, re.I):
        return f"LanceDB cannot write its files: {text}: check the permissions of the warehouse (--warehouse)"
    return f"LanceDB cannot read or write its files: {text}"


def describe_error(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one line for an error that reached the top of a command.

    2: the user or the environment can fix it (bad input, a missing or unwritable path, a warehouse
    that another process holds, an unreadable database or index, a damaged JSON file); 1: a step failed.
    """
    import errno

    from pipeline.errors import StepFailed

    names = _mro_names(exc)
    msg = _first_line(str(exc))
    if isinstance(exc, UserError):
        return 2, str(exc)
    if isinstance(exc, StepFailed):
        return 1, f"a step stopped: {msg}"
    if type(exc).__name__ in ("ValidationError", "SettingsError"):  # Settings built without Settings.load
        from pipeline.settings import invalid_setting

        invalid = invalid_setting(exc)
        if invalid is not None:
            return 2, str(invalid)
    if "duckdb.Error" in names:
        lock = re.search(r'Could not set lock on file "([^"]+)"', msg)
        if lock:
            pid = re.search(r"PID (\d+)", msg)
            held = f" (PID {pid.group(1)})" if pid else ""
            return 2, (f"the database {lock.group(1)} is in use by another process{held}: DuckDB allows one writer; "
                       "wait for it to finish and run this again")
        if names & {"duckdb.IOException", "duckdb.PermissionException"}:
            if re.search(r"read-only|permission denied", msg, re.I):
                return 2, f"cannot write the warehouse database: {msg}: check the permissions of the warehouse directory"
            return 2, f"DuckDB cannot read or write its file: {msg}"
        return 1, f"DuckDB: {msg}"
    if isinstance(exc, json.JSONDecodeError):
        where = _json_file_of(exc)
        return 2, f"{where or 'a JSON file'} is damaged (not valid JSON: {msg})"
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else None
        what = f"{exc.strerror}: {name}" if exc.strerror and name else (exc.strerror or msg)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return 2, f"cannot write {name or 'a file'} ({exc.strerror}): check the permissions of the warehouse (--warehouse)"
        if exc.errno == errno.EADDRINUSE:
            return 2, f"the address is already in use ({exc.strerror}): choose another --port or stop the other server"
        if isinstance(exc, (NotADirectoryError, FileExistsError)):
            return 2, f"{what}: a file stands where a directory is expected"
        if exc.errno is None and "lance" in msg.lower():
            return 2, _lance_line(msg)
        return 2, what
    if any(n.startswith(("lance.", "lancedb.")) for n in names) or msg.lower().startswith("lance error"):
        return 2, _lance_line(msg)
    return 1, f"{type(exc).__name__}: {msg}"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI: usage errors (click) and every error that reaches the top exit with one line
    (``paperkb: error: ...``), code 2 or 1 (:func:`describe_error`); ``-v`` prints the traceback first."""
    global _VERBOSE
    _VERBOSE = False
    try:
        app(args=argv, prog_name="paperkb")  # standalone: click prints usage errors and exits 2
    except ModuleNotFoundError as exc:
        profile = install_profile_of(exc.name or "")
        if profile is None:
            return _report(exc)
        print(f"paperkb: error: this command needs {exc.name!r}, which the [{profile}] install profile adds: "
              f"pip install 'paperkb[{profile}]'", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("paperkb: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # noqa: BLE001 - the one top-level handler: one line, -v for the traceback
        return _report(exc)
    return 0


def _report(exc: BaseException) -> int:
    code, line = describe_error(exc)
    if _VERBOSE:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    elif code == 1:
        line += " (paperkb -v ... shows the traceback)"
    print(f"paperkb: error: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
