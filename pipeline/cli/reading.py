"""Reading and search: search, ask, related, path, recommend, export, sql, eval, show, papers, author."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from pipeline.errors import UserError

from pipeline.cli.root import VERBOSE, app, check_export_format, get_settings, print_export, split_categories

PANEL = "Reading and search"
SNAPSHOTS_HELP = ("Snapshot id (default: CURRENT). Repeat to search several indexes as one ranking, each "
                  "[NAME=]WHERE: a snapshot folder, a warehouse or an id (each result names its index). "
                  "s3://bucket/prefix[@ID]: a snapshot store's CURRENT (or one id), read through the local cache.")
NORMALISATION_HELP = "Several snapshots: how their scores are made comparable: raw | minmax | zscore | rrf (default raw)."


def _one_snapshot(snapshot: Optional[list[str]], normalisation: Optional[str]) -> Optional[str]:
    """The one ``--snapshot`` given (None: CURRENT); UserError for --normalisation without several."""
    if normalisation is not None:
        raise UserError("--normalisation needs several --snapshot")
    return snapshot[0] if snapshot else None


@app.command(rich_help_panel=PANEL)
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
    author: Optional[list[str]] = typer.Option(None, "--author", help="Only papers with an author name containing this (accents optional), or named by it as cited ('A. J. Perlis'; repeatable)."),
    snapshot: Optional[list[str]] = typer.Option(None, "--snapshot", help=SNAPSHOTS_HELP),
    normalisation: Optional[str] = typer.Option(None, "--normalisation", help=NORMALISATION_HELP),
    queries: Optional[Path] = typer.Option(None, "--queries", help="Batch: queries file (qid<TAB>text TSV, SMART .QRY or TREC topics)."),
    run_out: Optional[Path] = typer.Option(None, "--run-out", help="Batch: write a TREC run here (qid Q0 docid rank score tag)."),
    tag: str = typer.Option("paperkb", "--tag", help="Run tag in the TREC run."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (everything, unabridged)."),
    wide: bool = typer.Option(False, "--wide", help="One column per signal (a table 220 columns wide); the default on "
                              "terminals of 150+ columns, else one wrapped cell per paper that fits 80 columns."),
    export_format: Optional[str] = typer.Option(None, "--format", help="Print the results for a reference manager: bibtex | ris | csl-json."),
) -> None:
    """Hybrid search of a published snapshot: ranked papers with their signals and the queries used."""
    import atexit
    import gc
    import json as _json
    import logging

    from pipeline.cli.timings import Clock, process_age_s
    from pipeline.query import Filters, Searcher, open_snapshot

    verbose = VERBOSE["on"]
    if not verbose:  # the results and nothing else: stderr only when something is wrong (-v: logs and timings)
        logging.getLogger().setLevel(logging.WARNING)
    clock = Clock(process_age_s())
    settings = get_settings(ctx)
    if (query is None) == (queries is None):
        raise UserError("give either a QUERY or --queries FILE")
    if queries is not None and run_out is None:
        raise UserError("--queries needs --run-out RUN.trec")
    filters = Filters(year_from=year_from, year_to=year_to, categories=split_categories(category) or [], authors=author or [])
    kwargs: dict[str, Any] = dict(filters=filters, fusion=fusion, expand=expand, rerank=rerank, title_boost=title_boost,
                                  config=config)
    if snapshot and len(snapshot) > 1:
        from pipeline.query.multi import open_multi

        searcher: Any = open_multi(settings, snapshot, one_shot=queries is None, normalisation=normalisation)
    else:
        searcher = Searcher(open_snapshot(settings, _one_snapshot(snapshot, normalisation)), settings,
                            one_shot=queries is None)
    clock.lap("open")
    if queries is not None and run_out is not None:
        from pipeline.evaluation.qrels import read_queries
        from pipeline.query.runs import search_trec_run

        qs = read_queries(queries)
        n = search_trec_run(searcher, qs, run_out, k=k, tag=tag, **kwargs)
        from pipeline.cli.console import echo

        echo(f"search: {len(qs)} queries -> {n} lines in {run_out} (snapshot {searcher_id(searcher)})")
        return
    check_export_format(export_format)
    searcher.warm(encoder=True)  # what the first search loads, timed apart from the search (took_ms is the search alone)
    t = searcher.timings
    clock.lap("load", f"snapshot data {t.get('warm', 0) * 1000:.0f} ms and query encoder {t.get('encoder', 0) * 1000:.0f} ms "
                      f"side by side; encoder: {searcher.encoder_kind}")
    resp = searcher.search(query or "", k=k, **kwargs)
    clock.lap_split("search", [("encode", searcher.timings.get("encode", 0.0), "the query")], f"took_ms {resp.took_ms:g} includes encode")
    if export_format:
        _print_exports(searcher, resp, export_format)
        named: list = []
    else:
        named = _named_works(searcher, query or "", resp)
        clock.lap("named", "cited works the query names")
    if as_json:
        print(_json.dumps({**resp.to_dict(), "cited_works": [w.to_dict() for w in named]}, indent=2, default=str))
    elif not export_format:
        from pipeline.query.display import print_named_works, print_search

        print_search(resp, wide=True if wide else None)
        print_named_works(named)
    if verbose:
        clock.lap("print")
        print(clock.line(), file=sys.stderr)
    # At exit, Python's last garbage collections walk every object the imports made (pydantic, pyarrow, Lance,
    # ONNX Runtime): ~0.25 s of a one-shot search here, to free memory the OS takes back anyway. Frozen objects
    # are left out of them (atexit: in a process that goes on, e.g. tests calling main(), nothing changes).
    atexit.register(gc.freeze)


def _named_works(searcher, query: str, resp) -> list:
    """The works outside the corpus whose title ``query`` names, among those the results cite (a search of one
    snapshot; none across several)."""
    snap = getattr(searcher, "snap", None)
    if snap is None or not resp.results or not snap.has_catalog():
        return []
    from pipeline.query.reading import cited_works_named, may_cite_outside

    if not may_cite_outside(snap.manifest):
        return []

    con = snap.catalog()
    try:
        return cited_works_named(con, query, [r.paper_id for r in resp.results])
    finally:
        con.close()


def searcher_id(searcher) -> str:
    """The snapshot id a Searcher reads, or ``id1+id2`` for several (a MultiSearcher)."""
    snap = getattr(searcher, "snap", None)
    return snap.snapshot_id if snap is not None else searcher.snapshot_id


def _print_exports(searcher, resp, export_format: str) -> None:
    """The results for a reference manager, each from its own index's snapshot."""
    if getattr(searcher, "snap", None) is not None:
        print_export(searcher.snap, [r.paper_id for r in resp.results], export_format)
        return
    for name, one in zip(searcher.names, searcher.searchers):
        ids = [r.paper_id for r in resp.results if r.index == name]
        if ids:
            print_export(one.snap, ids, export_format)


@app.command("ask", rich_help_panel=PANEL)
def ask_cmd(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="The question, in words."),
    k: int = typer.Option(5, "--k", "-k", min=1, max=20, help="Passages of evidence (the best passage of each of the top papers)."),
    llm: bool = typer.Option(True, "--llm/--no-llm", help="Have the configured LLM write an answer citing the evidence "
                             "(default when PAPERKB_LLM_BASE_URL and PAPERKB_LLM_MODEL are set)."),
    expand: Optional[str] = typer.Option(None, "--expand", help="Query expansion for the search: off | prf | rm3 | llm | auto."),
    snapshot: Optional[list[str]] = typer.Option(None, "--snapshot", help=SNAPSHOTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: the evidence, the checked claims, what was dropped."),
) -> None:
    """A question answered from the snapshot: numbered passages as evidence (paper, page, section); with an
    LLM configured, an answer whose every sentence cites a listed passage (a sentence citing none is dropped)."""
    import logging

    from pipeline.query.ask import ask

    if not VERBOSE["on"]:
        logging.getLogger().setLevel(logging.WARNING)
    settings = get_settings(ctx)
    if snapshot and len(snapshot) > 1:
        from pipeline.query.multi import open_multi

        searcher: Any = open_multi(settings, snapshot, one_shot=True)
    else:
        from pipeline.query import Searcher, open_snapshot

        searcher = Searcher(open_snapshot(settings, snapshot[0] if snapshot else None), settings, one_shot=True)
    answer = ask(searcher, settings, question, k=k, use_llm=llm, expand=expand)
    if as_json:
        print(json.dumps(answer.to_dict(), indent=2, default=str))
        return
    from pipeline.cli.paper_views import print_answer

    print_answer(answer)


@app.command(rich_help_panel=PANEL)
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
    searcher = Searcher(open_snapshot(settings, snapshot), settings, one_shot=True)  # its candidates' vectors alone
    check_export_format(export_format)
    items = searcher.related(paper_id, k=k)
    if export_format:
        print_export(searcher.snap, [r.paper_id or r.work_id for r in items], export_format)
        return
    if as_json:
        print(_json.dumps({"paper_id": searcher.resolve_id(paper_id), "snapshot_id": searcher.snap.snapshot_id,
                           "related": [r.to_dict() for r in items]}, indent=2, default=str))
        return
    from pipeline.query.display import print_related

    print_related(searcher, paper_id, items, wide=True if wide else None)


@app.command("export", rich_help_panel=PANEL)
def export_cmd(
    ctx: typer.Context,
    paper_ids: list[str] = typer.Argument(..., help="Paper ids (arXiv id, '<collection>:<docno>', or a citation-graph work id)."),
    export_format: str = typer.Option("bibtex", "--format", help="bibtex | ris | csl-json."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write to this file instead of standard output."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
) -> None:
    """Papers as BibTeX, RIS or CSL-JSON for a reference manager (Zotero, JabRef, EndNote, citeproc)."""
    from pipeline.query import open_snapshot

    fmt = check_export_format(export_format) or "bibtex"
    print_export(open_snapshot(get_settings(ctx), snapshot), paper_ids, fmt, out)


@app.command("path", rich_help_panel=PANEL)
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
    from pipeline.query.display import print_path

    print_path(res, max_length)


@app.command("recommend", rich_help_panel=PANEL)
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
    check_export_format(export_format)
    searcher = Searcher(open_snapshot(settings, snapshot), settings)
    resp = searcher.recommend(split_categories(pos) or [], split_categories(neg) or [], k=k)
    if export_format:
        print_export(searcher.snap, [r.paper_id for r in resp.results], export_format)
        return
    if as_json:
        print(_json.dumps(resp.to_dict(), indent=1, ensure_ascii=False, default=str))
        return
    from pipeline.query.display import print_recommend

    print_recommend(resp)


@app.command("sql", rich_help_panel=PANEL)
def sql_cmd(
    ctx: typer.Context,
    query: Optional[str] = typer.Argument(None, help="SQL to run (';' between statements). Omit it for -f FILE, SQL on "
                                          "stdin, or the shell on a terminal."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Run the SQL script in this file."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    warehouse_db: bool = typer.Option(False, "--warehouse-db", help="The working warehouse.duckdb instead of a snapshot "
                                      "(with run_log, rejects, watermarks; not while a step writes it)."),
    fmt: str = typer.Option("table", "--format", help="table (fits the terminal) | csv | json (an array of rows per statement)."),
    max_rows: int = typer.Option(40, "--max-rows", min=1, help="Table: rows shown before the middle ones are elided."),
) -> None:
    """SQL on a snapshot's catalog (DuckDB), read-only: a query, a script, or a shell (.tables, .schema NAME).

    Read-only: nothing is written, and nothing but the database and its own files is read (no other file or URL,
    ATTACH, COPY ... TO, EXPORT DATABASE, INSTALL or LOAD; temporary tables work). The catalog is opened as every
    reader opens it (``pipeline.snapshots.open_catalog``: its tables are views over the snapshot's Parquet files,
    whose relative paths resolve inside the snapshot folder). .schema NAME lists a table's columns and types."""
    import duckdb

    from pipeline import sql_shell
    from pipeline.cli.console import width

    if fmt not in sql_shell.FORMATS:
        raise UserError(f"unknown --format {fmt!r}: use {', '.join(sql_shell.FORMATS)}")
    if query is not None and file is not None:
        raise UserError("give either a QUERY or -f FILE")
    if warehouse_db and snapshot:
        raise UserError("give either --snapshot or --warehouse-db")
    if file is not None:
        if not file.is_file():
            raise UserError(f"no SQL file at {file}")
        query = file.read_text(encoding="utf-8")
    elif query is None and not sys.stdin.isatty():
        query = sys.stdin.read()
    settings = get_settings(ctx)
    snap = None
    if warehouse_db:
        db = settings.warehouse / "warehouse.duckdb"
        if not db.is_file():
            raise UserError(f"no warehouse database at {db}")
        from pipeline.snapshots import CONNECT_CONFIG, lock_down

        con, what = duckdb.connect(str(db), read_only=True, config=CONNECT_CONFIG), f"warehouse {db}"
        try:
            lock_down(con, [])  # its own file alone, as a snapshot's catalog (sql_shell's doc says what that covers)
        except BaseException:
            con.close()
            raise
    else:
        from pipeline.query import open_snapshot

        snap = open_snapshot(settings, snapshot, need_fts=False, who="paperkb sql")  # pinned while the SQL runs
        con, what = snap.catalog(), f"snapshot {snap.snapshot_id}"
    try:
        if query is None:
            print(f"paperkb sql: {what}, read-only (no other file is read or written); statements end with ';'; "
                  ".help, .quit")
            with sql_shell.history() as remember:
                sql_shell.shell(con, fmt=fmt, width=width, max_rows=max_rows, remember=remember)
            return
        if not query.strip():
            raise UserError("no SQL given")
        try:
            if query.strip().startswith("."):  # the shell's .tables / .schema NAME / .help, given as the query
                sql_shell.dot(con, query, sys.stdout, width())
            else:
                sql_shell.run_script(con, query, sys.stdout, fmt, width(), max_rows)
        except sql_shell.SqlError as exc:
            raise UserError(str(exc)) from None
    finally:
        con.close()
        if snap is not None:
            snap.close()


@app.command("eval", rich_help_panel=PANEL)
def eval_cmd(
    ctx: typer.Context,
    queries: Path = typer.Option(..., "--queries", help="Queries: SMART (.QRY, cran.qry) or TREC (qid<TAB>text, or <top> topics)."),
    qrels: Path = typer.Option(..., "--qrels", help="Judgements: SMART (.REL, cranqrel) or TREC (qid 0 docid rel)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="smart | trec (default: detected from each file)."),
    with_ablations: bool = typer.Option(False, "--ablations", help="Also BM25/dense/fusion only, seed, each signal removed, expansion and title boosts on/off."),
    snapshot: Optional[list[str]] = typer.Option(None, "--snapshot", help=SNAPSHOTS_HELP + " The qrels judge the first "
                                                 "one's papers; the others' count as not relevant."),
    normalisation: Optional[str] = typer.Option(None, "--normalisation", help=NORMALISATION_HELP),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Where TREC runs + qrels go (default: WAREHOUSE/eval/SNAPSHOT)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """nDCG@10, MAP and R@100 (as trec_eval and ir-measures compute them) of the default ranking and its ablations, with TREC run files."""
    from pipeline.evaluation.evaluate import evaluate, relative_to, summary_json

    if fmt is not None and fmt not in ("smart", "trec"):
        raise UserError(f"unknown --format {fmt!r}: use smart or trec")
    settings = get_settings(ctx)
    summary = evaluate(settings, queries, qrels, fmt=fmt, with_ablations=with_ablations,
                       snapshot_id=snapshot if snapshot and len(snapshot) > 1 else _one_snapshot(snapshot, normalisation),
                       run_dir=run_dir, normalisation=normalisation if snapshot and len(snapshot) > 1 else None)
    if as_json:
        print(summary_json(summary))
        return
    from rich.console import Console
    from rich.table import Table

    what = (f"indexes {', '.join(ix['index'] + ' (' + ix['snapshot_id'] + ')' for ix in summary['indexes'])} merged "
            f"({summary['normalisation']})" if summary.get("indexes") else f"snapshot {summary['snapshot_id']}")
    table = Table(title=f"paperkb eval: {what}, {summary['queries']} judged queries")
    table.add_column("configuration")
    for m in summary["measures"]:
        table.add_column("MAP" if m == "AP" else m, justify="right")
    table.add_column("s/query", justify="right")
    for row in summary["rows"]:
        vals = [f"{row['measures'][m]:.4f}" for m in summary["measures"]] if row["measures"] else ["-"] * len(summary["measures"])
        table.add_row(row["name"], *vals, f"{row['seconds'] / max(row['queries'], 1):.3f}" if row["queries"] else "-")
    console = Console()  # the terminal's width; 80 columns when piped
    console.print(table)
    for note in summary["notes"]:
        console.print(f"note: {note}")
    ratio = relative_to(summary)
    if ratio is not None:
        console.print(f"default / better of (bm25 only, dense only) nDCG@10 = {ratio:.3f}x")
    console.print(f"runs: {summary['run_dir']}")


def _catalog(ctx: typer.Context, snapshot: Optional[str]):
    """(snapshot, read-only catalog connection) of ``--snapshot`` or CURRENT; the caller closes both."""
    from pipeline.query import open_snapshot

    snap = open_snapshot(get_settings(ctx), snapshot, need_fts=False)
    try:
        return snap, snap.catalog()
    except BaseException:
        snap.close()
        raise


@app.command("show", rich_help_panel=PANEL)
def show_cmd(
    ctx: typer.Context,
    paper_id: str = typer.Argument(..., help="Paper id (arXiv id, '<collection>:<docno>', local:..., its DOI, address or "
                                             "title), or a cited work's id."),
    top: int = typer.Option(5, "--top", min=0, max=200, help="References and citing papers listed (most cited first)."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """One paper: metadata, authors, abstract, metrics, links, references and cited-by (each with the sentence that
    cites it, from the PDFs), figures, sections (a work the papers cite, outside the corpus: what is known of it, how
    their reference lists print it, the papers citing it, the works cited with it)."""
    from pipeline.cli.console import out, width
    from pipeline.cli.paper_views import show_lines, work_lines
    from pipeline.query.paper_detail import paper_detail, work_detail
    from pipeline.query.records import resolve_ids

    snap, con = _catalog(ctx, snapshot)
    try:
        (kind, found), = resolve_ids(con, [paper_id])
        # a work the corpus cites, outside it: what is known of it and who cites it here
        detail = work_detail(con, found, top=top) if kind == "work" else paper_detail(con, found, top=top)
    finally:
        con.close()
        snap.close()
    if as_json:
        print(json.dumps({"snapshot_id": snap.snapshot_id, **detail}, indent=2, default=str))
        return
    if kind == "work":
        out("\n".join(work_lines(detail, width())))
        return
    out("\n".join(show_lines(detail["paper"], detail["facts"], detail["references"], detail["cited_by"],
                               detail["figures"], detail["metrics"], width())))


@app.command("papers", rich_help_panel=PANEL)
def papers_cmd(
    ctx: typer.Context,
    sort: str = typer.Option("pagerank", "--sort", help="pagerank | citations | date | title."),
    author: Optional[str] = typer.Option(None, "--author", help="Only papers with an author name containing this (accents optional), or named by it as cited ('A. J. Perlis')."),
    category: Optional[str] = typer.Option(None, "--category", help="Only papers in this arXiv category."),
    year_from: Optional[int] = typer.Option(None, "--year-from", help="Only papers from this year on."),
    year_to: Optional[int] = typer.Option(None, "--year-to", help="Only papers up to this year."),
    limit: int = typer.Option(20, "--limit", "-n", help="How many papers (1-200)."),
    offset: int = typer.Option(0, "--offset", help="Skip this many first."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The snapshot's papers, sorted by PageRank, citations, date or title, filtered by author, category, years."""
    from pipeline.cli.console import out, width
    from pipeline.cli.paper_views import papers_lines
    from pipeline.query.reading import list_papers

    snap, con = _catalog(ctx, snapshot)
    try:
        page = list_papers(con, sort=sort, author=author, category=category, year_from=year_from, year_to=year_to,
                           limit=limit, offset=offset).to_dict()
    finally:
        con.close()
        snap.close()
    if as_json:
        print(json.dumps({"snapshot_id": snap.snapshot_id, **page}, indent=2, default=str))
        return
    what = "papers" + "".join(f" {k} {v!r}" for k, v in (("by", author), ("in", category)) if v)
    out("\n".join(papers_lines(page, width(), what)))


@app.command("author", rich_help_panel=PANEL)
def author_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The author's name as printed (case, spaces and dots do not matter), "
                                         "or a surname alone or with initials or given names, either order."),
    limit: int = typer.Option(20, "--limit", "-n", help="Papers listed (most cited first, 1-200)."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Snapshot id (default: CURRENT)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """An author: papers in the snapshot, co-authors, years, citations and h-index."""
    from pipeline.cli.console import out, width
    from pipeline.cli.paper_views import author_lines
    from pipeline.query.reading import author_profile

    snap, con = _catalog(ctx, snapshot)
    try:
        profile = author_profile(con, name, limit=limit).to_dict()
    finally:
        con.close()
        snap.close()
    if as_json:
        print(json.dumps({"snapshot_id": snap.snapshot_id, **profile}, indent=2, default=str))
        return
    out("\n".join(author_lines(profile, width())))
