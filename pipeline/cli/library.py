"""Library and feeds: import a collection or PDFs, match a library file, saved interests and their feeds."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from pipeline.errors import UserError

from pipeline.cli.console import echo
from pipeline.cli.root import app, get_settings, print_export, split_categories

PANEL = "Library and feeds"


@app.command("import-collection", rich_help_panel=PANEL)
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
    echo(f"import-collection {s['collection']}: {s['papers']} papers, {s['authors']} authors, "
         f"{s['works']} works, {s['citations']} citations, {s['rejected']} rejected")


@app.command("import-pdfs", rich_help_panel=PANEL)
def import_pdfs_cmd(
    ctx: typer.Context,
    folder: Path = typer.Argument(..., help="Folder of PDFs (sub-folders included; other files are ignored), one PDF "
                                   "file, or a library (.bib, .json CSL-JSON, .ris) whose entries point at PDFs."),
    lookup: bool = typer.Option(True, "--lookup/--no-lookup", help="Then ask the arXiv API for the arXiv papers, so "
                                "their authors, title and dates are arXiv's own (the PDF's stay when it cannot be reached)."),
    follow_links: bool = typer.Option(False, "--follow-links", help="Read the PDFs that symbolic links in the folder "
                                      "point at outside it (by default each such link is skipped, with a line saying so)."),
) -> None:
    """Bring your own library: add local PDFs as papers (arXiv id from the side stamp or file name, else local:<sha256>).

    Title, abstract, version and category come from the PDF itself; from a library file, the entry's
    arXiv id, title, authors, year and DOI win. The bytes go to the raw zone like a download, so
    `paperkb fulltext` extracts them without the network. Unusable files, and library entries without a
    PDF or with a missing one, go to rejects (and each such entry is listed).
    """
    from pipeline.sources.pdf.worker import for_import

    settings = get_settings(ctx)
    # the worker that reads the PDFs starts first: its imports run beside this process's own
    with for_import(settings) as worker:
        from pipeline.library.pdf_folder import entry_lines, import_pdfs, lookup_imported, summary_line

        s = import_pdfs(settings, folder, worker=worker, follow_links=follow_links)
    echo(summary_line(s))
    for line in entry_lines(s):
        echo(line, indent="      ")
    if lookup and (looked := lookup_imported(settings, s)) is not None:
        if "error" in looked:
            echo(f"import-pdfs: arXiv metadata not fetched for {looked['requested']} papers (authors, titles and "
                 f"dates read from the PDFs stay; `paperkb lookup ID` later): {looked['error']}", err=True)
        else:
            echo(f"import-pdfs: arXiv metadata for {looked.get('found', 0)} of {looked.get('requested', 0)} arXiv papers")


@app.command("match-library", rich_help_panel=PANEL)
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
    echo(f"match-library {library.name} ({report.format}, {report.entries} entries): {len(report.matched)} matched, "
         f"{len(report.unmatched)} unmatched; against {against}")
    for m in report.matched:
        echo(f"  matched   #{m.entry.index:<4} {m.entry.key or '-'} -> {m.paper_id} (by {m.by}) {m.title or ''}", indent=" " * 17)
    for u in report.unmatched:
        echo(f"  unmatched #{u.entry.index:<4} {u.entry.key or '-'}: {u.entry.title or '(no title)'} [{u.reason}]",
             indent=" " * 17)
    for p in report.problems:
        echo(f"  problem: {p}", indent=" " * 11)


interests_app = typer.Typer(help="Saved searches and seed sets whose new papers each publish lists as feeds.", no_args_is_help=True)
app.add_typer(interests_app, name="interests", rich_help_panel=PANEL)


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
    author: Optional[list[str]] = typer.Option(None, "--author", help="Query interests: only papers with an author name containing this, or named by it as cited ('A. J. Perlis')."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="Cosine similarity a new paper needs (default: setting "
                                              "feed_query_threshold 0.50 for a query, feed_seed_threshold 0.75 for seeds)."),
    replace: bool = typer.Option(False, "--replace", help="Replace an interest of the same name."),
) -> None:
    """Save an interest; from the next publish on, its snapshot holds a feed of the new papers that match it."""
    from pipeline.feeds.interests import add_interest
    from pipeline.query.filters import Filters

    filters = Filters(year_from=year_from, year_to=year_to, categories=split_categories(category) or [], authors=author or [])
    it = add_interest(get_settings(ctx), name, query=query, filters=filters, seeds=split_categories(seed),
                      library=library, library_format=library_format, threshold=threshold, replace=replace)
    echo(f"interests: saved {it.name} ({it.describe()})")
    for u in it.unmatched:
        echo(f"  unmatched #{u['index']:<4} {u['key'] or '-'}: {u['title'] or '(no title)'} [{u['reason']}]", indent=" " * 17)


@interests_app.command("list")
def interests_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Saved interests, by name."""
    from pipeline.feeds.interests import list_interests

    items = list_interests(get_settings(ctx))
    if as_json:
        print(json.dumps([i.to_dict() for i in items], indent=1, ensure_ascii=False))
        return
    if not items:
        echo("interests: none (add one with `paperkb interests add NAME --query TEXT | --seed ID | --from FILE`)")
    for i in items:
        th = f"threshold {i.threshold:.2f}" if i.threshold is not None else "default threshold"
        echo(f"{i.name:<20} {i.kind:<6} {th:<18} {i.describe()}" + (f" ({len(i.unmatched)} unmatched)" if i.unmatched else ""),
             indent="    ")


@interests_app.command("remove")
def interests_remove(ctx: typer.Context, name: str = typer.Argument(..., help="Interest name.")) -> None:
    """Forget an interest (feeds already published stay in their snapshots)."""
    from pipeline.feeds.interests import remove_interest

    remove_interest(get_settings(ctx), name)
    echo(f"interests: removed {name}")


FEED_PRINT_FORMATS = ("md", "atom", "json", "html", "bibtex", "ris", "csl-json")


@app.command("feeds", rich_help_panel=PANEL)
def feeds_cmd(
    ctx: typer.Context,
    name: Optional[str] = typer.Argument(None, help="A feed (interest) name; omit to list the snapshot's feeds."),
    feed_format: Optional[str] = typer.Option(None, "--format", help="md | atom | json (JSON Feed) | html, or the papers for a "
                                              "reference manager: bibtex | ris | csl-json. Default: the Markdown digest "
                                              "laid out for the terminal."),
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
        echo(f"feeds: snapshot {out['snapshot_id']}: " + (f"mailed to {', '.join(out['sent_to'])}" if out["sent_to"]
                                                          else f"not mailed: {out['skipped']}"))
        return
    path = snapshots.resolve(settings.snapshots_dir, snapshot)
    if name is None:
        index = feeds_mod.read_index(path)
        if as_json:
            print(json.dumps(index, indent=1, ensure_ascii=False))
            return
        if not index:
            echo(f"feeds: snapshot {path.name} has none (interests are added with `paperkb interests add`; "
                 "feeds appear from the next publish on)")
            return
        since = index.get("previous_snapshot_id") or "none (first snapshot)"
        echo(f"feeds of snapshot {path.name}: {index['new_papers']} new paper(s) since {since}")
        for n, f in index["feeds"].items():
            echo(f"{n:<20} {f['matched']:>4} matching  {f['description']}" + "".join(f"; {x}" for x in f.get("notes", []))
                 + "".join(f"; FAILED {k}: {v}" for k, v in (f.get("failed") or {}).items()), indent="    ")
        return
    if feed_format is None:  # the digest to read: the Markdown laid out to the terminal's width
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(feeds_mod.feed_file(path, name, "md").read_text(encoding="utf-8"), hyperlinks=False))
        return
    if feed_format not in FEED_PRINT_FORMATS:
        raise UserError(f"unknown feed format {feed_format!r}: choose one of {', '.join(FEED_PRINT_FORMATS)}")
    if feed_format in feeds_mod.FORMATS:
        sys.stdout.write(feeds_mod.feed_file(path, name, feed_format).read_text(encoding="utf-8"))
        return
    from pipeline.query import open_snapshot

    ids = feeds_mod.item_ids(feeds_mod.read_feed(path, name))
    if not ids:
        echo(f"feeds: {name} lists no paper in snapshot {path.name}", err=True)
        return
    print_export(open_snapshot(settings, path.name), ids, feed_format)
