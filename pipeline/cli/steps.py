"""Pipeline steps: harvest, lookup, enrich, fulltext, extract, graph, embed, publish, refresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from pipeline.errors import UserError

from pipeline.cli.console import echo, short, width
from pipeline.cli.root import app, get_settings, split_categories

PANEL = "Pipeline steps"


@app.command(rich_help_panel=PANEL)
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

    settings = get_settings(ctx, categories=split_categories(categories))
    try:
        summary = run_harvest(settings, from_date=from_date, until_date=until_date, replay=replay)
    except StepFailed as exc:
        echo(f"paperkb: harvest stopped: {exc}", err=True)
        raise typer.Exit(1)
    echo(summary_line(summary))


@app.command(rich_help_panel=PANEL)
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
        echo(f"paperkb: lookup stopped: {exc}", err=True)
        raise typer.Exit(1)
    echo(summary_line(summary))


@app.command(rich_help_panel=PANEL)
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
        echo(f"paperkb: enrich stopped: {exc}", err=True)
        raise typer.Exit(1)
    echo(one_line(summary))


@app.command(rich_help_panel=PANEL)
def fulltext(
    ctx: typer.Context,
    replay: bool = typer.Option(False, "--replay", help="Re-extract every PDF already in the raw zone, without the network."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Papers per batch (setting PAPERKB_FULLTEXT_BATCH_SIZE)."),
) -> None:
    """Download PDFs of papers without full text, extract body chunks, figure legends and abstracts."""
    from pipeline.steps.fulltext import run_fulltext, summary_line

    settings = get_settings(ctx)
    echo(summary_line(run_fulltext(settings, replay=replay, batch_size=batch_size)))


@app.command(rich_help_panel=PANEL)
def extract(
    ctx: typer.Context,
    pdf: Path = typer.Argument(..., help="A PDF file."),
    as_json: bool = typer.Option(False, "--json", help="Print everything as JSON (pages, sections, chunks, figures)."),
    paper_id: Optional[str] = typer.Option(None, "--paper-id", help="Id to put in chunk/figure ids (default: file name)."),
) -> None:
    """Show what the pipeline would store for one PDF: pages, sections, chunks, figure legends."""

    from pipeline.sources.pdf.worker import for_extraction

    settings = get_settings(ctx)
    # the worker that reads the PDF starts first: its imports run beside this process's own
    with for_extraction(settings) as worker:
        from pipeline.steps.fulltext import extract_file

        result = extract_file(settings, pdf, paper_id=paper_id, worker=worker)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=1))
        return
    echo(f"{pdf.name}: {result.n_pages} pages, {len(result.body)} chars, {len(result.sections)} sections, "
         f"{len(result.chunks)} chunks, {len(result.figures)} figures, abstract {'found' if result.abstract else 'not found'}")
    for s in result.sections:
        echo(f"  p{s['page']:<3} {s['title']}", indent=" " * 7)
    for f in result.figures:
        echo(f"  p{f.page:<3} {short(f.text, 2 * (width() - 8))}", indent=" " * 7)


@app.command(rich_help_panel=PANEL)
def graph(
    ctx: typer.Context,
    damping: Optional[float] = typer.Option(None, "--damping", help="PageRank damping (setting graph_damping, default 0.85)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", min=1, help="Related works per corpus paper (setting graph_top_k, default 50)."),
    full: bool = typer.Option(False, "--full", help="Recompute every paper's related list now (by default a run "
                              "computes new and changed papers' lists and, in turn, a share of the others that follows the citation "
                              "graph's change: graph_related_refresh_change)."),
) -> None:
    """Citation graph: PageRank, power-law fit and weights, weighted CCBC related papers."""
    from pipeline.steps.graph import run_graph

    settings = get_settings(ctx, graph_damping=damping, graph_top_k=top_k)
    echo(graph_line(run_graph(settings, full=full)))


def graph_line(s: dict) -> str:
    """The summary of ``run_graph`` (pure)."""
    pl = s["powerlaw"]
    fit = (f"power law xmin={pl['xmin']:g} alpha={pl['alpha']:.3f} KS D={pl['ks_d']:.3f} "
           f"vs lognormal R={pl['loglikelihood_ratio']:.2f} p={pl['p_value']:.3g}") if pl["status"] == "ok" else f"power law: {pl['status']} (weights 1)"
    pdf = s.get("pdf_citations") or {}
    from_pdfs = (f" ({pdf.get('edges', 0)} from {pdf.get('references', 0)} PDF references, "
                 f"{pdf.get('corpus_edges', 0)} between corpus papers)") if pdf.get("references") else ""
    return (f"graph: {s['works']} works, {s['citations']} citations{from_pdfs}, {s['corpus_papers']} corpus papers -> "
            f"{s['metrics']} metrics, {s['related']} related{_lists(s)}; {fit}; run {s['run_id']}")


def _lists(s: dict) -> str:
    """Which related lists the run computed (pure; empty for a summary without the counts)."""
    if "related_full" not in s:
        return ""
    if s["related_full"]:
        return f" (all {s['related_papers']} lists recomputed)"
    due = s["related_papers"] - s.get("related_changed", 0)
    change = f"; the links changed {100 * s['links_changed']:.2f}% since the last run" if "links_changed" in s else ""
    return f" ({s.get('related_changed', 0)} new or changed lists, {due} more recomputed in turn{change})"


@app.command(rich_help_panel=PANEL)
def embed(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="sentence-transformers model name or path (setting embed_model; default bundled all-MiniLM-L6-v2)."),
    query_model: Optional[str] = typer.Option(None, "--query-model", help="Separate query encoder for asymmetric models (setting embed_query_model)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Texts per encoder batch (setting embed_batch_size, default 64)."),
    device: Optional[str] = typer.Option(None, "--device", help="torch device: cpu, cuda, mps (setting embed_device)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="torch | onnx | openvino (setting embed_backend; default torch)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="fp32 | bf16 | fp16 | int8 (setting embed_precision; default by device and backend)."),
    full: bool = typer.Option(False, "--full", help="Compare every passage, paper and legend with LanceDB (by default "
                              "only those of the papers the warehouse's change log names since the last embed; use it "
                              "after writing to the warehouse outside paperkb's steps)."),
) -> None:
    """Encode new and changed passages, abstracts and figure legends into LanceDB (incremental by content hash)."""
    from pipeline.steps.embed import run_embed

    settings = get_settings(ctx, embed_model=model, embed_query_model=query_model, embed_batch_size=batch_size,
                            embed_device=device, embed_backend=backend, embed_precision=precision)
    echo(embed_line(run_embed(settings, full=full)))


def embed_line(s: dict) -> str:
    """The summary of ``run_embed`` (pure)."""
    ch = s["changes"]
    read = f"{s['read']} passages or legends changed since the last embed; " if "read" in s else ""
    return (f"embed: {s['passages']} passages, {s['papers']} papers, {s['figures']} figures in; {read}"
            f"{s['encoded']} texts encoded with {s['model']} ({s['dim']}-d, {s.get('runtime', 'torch-fp32')}); "
            f"rows written {sum(c['inserted'] + c['updated'] for c in ch.values())}, "
            f"deleted {sum(c['deleted'] for c in ch.values())}; 0 rejected; {s['seconds']}s")


@app.command(rich_help_panel=PANEL)
def publish(
    ctx: typer.Context,
    full: bool = typer.Option(False, "--full", help="Read every warehouse table for the catalog (by default a table "
                              "whose writers log their changes is read only where they changed)."),
) -> None:
    """Build, verify and publish an immutable snapshot, then point CURRENT at it."""
    from pipeline.steps.publish import run_publish

    settings = get_settings(ctx)
    echo(publish_line(run_publish(settings, full=full)))


def publish_line(s: dict) -> str:
    """The summary of ``run_publish`` (pure)."""
    c = s["counts"]
    return (f"publish: snapshot {s['snapshot_id']} is CURRENT ({c.get('lancedb.chunks', 0)} passages, "
            f"{c.get('lancedb.papers', 0)} papers, {s['bytes'] / 1e6:.1f} MB"
            + (f" of which {s['bytes_new'] / 1e6:.1f} MB new" if s.get("bytes_new") is not None else "")
            + f", {s['seconds']}s); "
            f"previous {s['previous'] or 'none'}; removed {len(s['removed'])} old"
            + "".join(f"; kept {k}: {why}" for k, why in (s.get("kept_pinned") or {}).items())
            + (f"; feeds failed: {', '.join(s['feeds_failed'])} (manifest feeds_failed)" if s.get("feeds_failed") else "")
            + (f"; CURRENT in {st['store']} too: uploaded {st['objects_uploaded']} of {st['objects']} objects "
               f"({st['bytes_uploaded'] / 1e6:.1f} MB) in {st['requests']} requests" if (st := s.get("store")) else ""))


def step_line(step: str, summary: dict) -> str:
    """A step's own summary (as its command prints it) without the leading ``step: ``; the step's
    ``key=value`` scalars when the summary is not of that shape."""
    from pipeline.steps import enrich, fulltext, harvest
    from pipeline.steps.refresh import one_line

    lines = {"harvest": harvest.summary_line, "enrich": enrich.one_line, "fulltext": fulltext.summary_line,
             "graph": graph_line, "embed": embed_line, "publish": publish_line}
    try:
        line = lines[step](summary)
    except (KeyError, TypeError):
        return one_line(summary)
    return line.removeprefix(f"{step}: ")


@app.command(rich_help_panel=PANEL)
def refresh(
    ctx: typer.Context,
    from_date: Optional[str] = typer.Option(None, "--from", help="First day to harvest (YYYY-MM-DD); default: the harvest watermark."),
    until_date: Optional[str] = typer.Option(None, "--until", help="Last day to harvest, inclusive (YYYY-MM-DD); default: today."),
    replay: bool = typer.Option(False, "--replay", help="Rebuild arXiv and S2 tables from the raw zone only (no network)."),
) -> None:
    """All steps in order, in this process, as the nightly DAG runs them: harvest .. publish."""
    from pipeline.steps.refresh import STEP_ORDER, run_refresh
    from pipeline.dates import parse_day

    settings = get_settings(ctx)
    start, end = parse_day(from_date, "--from"), parse_day(until_date, "--until")
    if start and end and start > end:
        raise UserError(f"--from {start} is after --until {end}")

    def show(step: str, summary: dict, seconds: float) -> None:
        n = STEP_ORDER.index(step) + 1
        echo(f"[{n}/{len(STEP_ORDER)}] {step} ({seconds:.1f}s): {step_line(step, summary)}", indent="      ")

    result = run_refresh(settings, from_date=start, until_date=end, replay=replay, on_step=show)
    total = sum(result["seconds"].values())
    if result.get("not_published"):  # an empty source: a warning, exit 0, CURRENT untouched
        echo(f"paperkb: warning: {result['not_published']}", err=True)
        echo(f"refresh: done in {total:.1f}s; nothing published")
        return
    echo(f"refresh: done in {total:.1f}s; published snapshot {result.get('snapshot_id')}")
