"""What ``paperkb search``, ``related``, ``recommend`` and ``path`` print: rich tables for the first two,
wrapped lines for the others; all of it fits the terminal (80 columns when piped)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.query.author_names import short_byline
from pipeline.terminal import printable


def _short(text: str | None, n: int = 160) -> str:
    """``text`` on one line, at most ``n`` characters, cut between words (`` …`` marks the cut), printable
    (:func:`~pipeline.terminal.printable`: a title's ESC or NUL prints as ``\\x1b``, ``\\x00``)."""
    t = printable(" ".join((text or "").split()), one_line=True)
    if len(t) <= n:
        return t
    cut = t[: n - 2]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " \u2026"


# Below this many columns the one-column-per-signal table squeezes its cells to "Li…" and "1.…": the
# compact layout (one wrapped cell per paper: title, id, signals, passage) is used instead.
WIDE_MIN_COLUMNS = 150
WIDE_COLUMNS = 220  # --wide on a narrower terminal or a pipe: lay the full table out this wide


def print_search(resp, console: Console | None = None, wide: bool | None = None) -> None:
    """The ranked papers as a table: every signal in its own column when the console is wide enough
    (or ``wide=True``), else the compact layout that stays readable at 80 columns."""
    console = console or Console()
    if wide is None:
        wide = console.width >= WIDE_MIN_COLUMNS
    elif wide and console.width < WIDE_COLUMNS:
        console.width = WIDE_COLUMNS
    sig_names: list[str] = []
    for r in resp.results:
        for name in r.signals:
            if name not in sig_names:
                sig_names.append(name)
    weights = ", ".join(f"{k}={v:g}" for k, v in resp.weights.items() if v)
    where = (f"indexes {', '.join(ix['index'] for ix in resp.indexes)} ({resp.normalisation})" if resp.indexes
             else f"snapshot {resp.snapshot_id}")
    title = f"{resp.query!r}: {len(resp.results)} papers ({where}, config {resp.config}: {weights})"
    if not wide:
        _print_compact(resp, console, sig_names, title)
        return
    table = Table(title=title, show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("paper")
    table.add_column("score", justify="right")
    for n in sig_names:
        table.add_column(n, justify="right")
    table.add_column("best passage")
    for r in resp.results:
        where = _where(r)
        head = f"[bold]{escape(_short(r.title, 90))}[/bold]\n{escape(_index(r))}{escape(_byline(r))}"
        table.add_row(str(r.rank), head, f"{r.score:.3f}", *[f"{r.signals.get(n, 0.0):.3f}" for n in sig_names],
                      f"[dim]{escape(where)}[/dim] {escape(_short(r.excerpt or r.passage))}")
    console.print(table)
    _print_footer(resp, console)


def _index(r) -> str:
    """``[arxiv] `` before a result's id when several indexes were searched (``[arxiv, +library] ``: the
    paper is in both), else nothing."""
    index = getattr(r, "index", None)
    if index is None:
        return ""
    return "[" + ", +".join([index, *(getattr(r, "also_in", None) or [])]) + "] "


def _byline(r) -> str:
    """``1706.03762 · Vaswani et al. (2017)``: the id, the authors as a citation names them, the year."""
    who = short_byline(getattr(r, "authors", None) or [])
    return printable(r.paper_id + (f" · {who}" if who else "") + (f" ({r.year})" if r.year else ""), one_line=True)


def _where(r) -> str:
    """Where the best passage is: page, and the part of the paper when it is not the body ('p.12 appendix')."""
    where = f"p.{r.page}" if r.page is not None else (r.section or "")
    role = getattr(r, "role", None)
    return printable(f"{where} {role}".strip() if role and role not in ("body", "abstract") else where, one_line=True)


def _print_compact(resp, console: Console, sig_names: list[str], title: str) -> None:
    """One row per paper, three columns (#, paper, score); the paper cell wraps at word and signal
    boundaries: title, id (year) and where the passage is, the signals as name=value, the passage."""
    table = Table(title=title, show_lines=True, expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("paper: signals, best passage", overflow="fold", ratio=1)
    table.add_column("score", justify="right", no_wrap=True)
    for r in resp.results:
        where = _where(r)
        ident = _index(r) + _byline(r) + (f" · {where}" if where else "")
        signals = "  ".join(f"{n}={r.signals.get(n, 0.0):.3f}" for n in sig_names)
        table.add_row(str(r.rank), f"[bold]{escape(_short(r.title, 160))}[/bold]\n{escape(ident)}\n"
                      f"[cyan]{signals}[/cyan]\n[dim]{escape(_short(r.excerpt or r.passage, 240))}[/dim]", f"{r.score:.3f}")
    console.print(table)
    _print_footer(resp, console)


def _print_footer(resp, console: Console) -> None:
    console.print(escape(f"queries used ({resp.expand}): " + " | ".join(printable(q, one_line=True) for q in resp.queries)))
    console.print(f"fusion {resp.fusion}, rerank {'on' if resp.rerank else 'off'}, title boosts {'on' if resp.title_boost else 'off'}, "
                  f"{resp.took_ms} ms")
    for note in resp.notes:
        console.print(escape(f"note: {printable(note, one_line=True)}"))


def print_named_works(works, console: Console | None = None) -> None:
    """The works outside the corpus whose title the query names (:func:`pipeline.query.reading.cited_works_named`),
    a line each: id, title, authors as a citation names them, year, and the corpus papers citing it."""
    if not works:
        return
    console = console or Console()
    table = Table(title="cited works the query names, outside this index (paperkb show WORK_ID)", title_justify="left",
                  box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column("work", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=1)
    for w in works:
        who = short_byline(w.authors)
        byline = ", ".join(filter(None, [who, str(w.year) if w.year else ""]))
        table.add_row(escape(printable(w.work_id, one_line=True)), f"[bold]{escape(_short(w.title, 160))}[/bold]\n"
                      + escape(f"{printable(byline, one_line=True) + ' · ' if byline else ''}cited by {w.cited_here} paper"
                               f"{'' if w.cited_here == 1 else 's'} here"))
    console.print(table)


def print_related(searcher, paper_id: str, items, console: Console | None = None, wide: bool | None = None) -> None:
    """Related papers: one column per component on a wide console (or ``wide=True``), else one wrapped
    cell per paper that stays readable at 80 columns."""
    console = console or Console()
    if wide is None:
        wide = console.width >= WIDE_MIN_COLUMNS
    elif wide and console.width < WIDE_COLUMNS:
        console.width = WIDE_COLUMNS
    center = searcher.paper(paper_id)["paper"]
    title = escape(f"related to {printable(center['paper_id'], one_line=True)}: {_short(center.get('title'), 80)}")
    if not wide:
        table = Table(title=title, show_lines=True, expand=True)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("paper: components", overflow="fold", ratio=1)
        table.add_column("score", justify="right", no_wrap=True)
        for r in items:
            cites = (f", {r.citation_count} citation{'' if r.citation_count == 1 else 's'}"
                     if r.citation_count is not None else "")
            ident = printable(f"{r.paper_id or r.work_id}", one_line=True) + (f" ({r.year}{cites})" if r.year else (f" ({cites[2:]})" if cites else ""))
            parts = (f"ccbc_w={r.ccbc_weighted:.3f}  ccbc={r.ccbc_naive:.3g}  sem={r.semantic:.3f}  "
                     f"fused={r.fused:.3f}  quality={r.quality:.3f}")
            comp = "  ".join(f"{k[:3]}={v:.2f}" for k, v in r.components.items())
            table.add_row(str(r.rank), f"[bold]{escape(_short(r.title, 160))}[/bold]\n{escape(ident)}\n[cyan]{parts}[/cyan]"
                          + (f"\n[dim]{comp}[/dim]" if comp else ""), f"{r.score:.3f}")
        console.print(table)
        _print_related_footer(searcher, items, console)
        return
    table = Table(title=title)
    for col in ("#", "paper", "year", "cites", "ccbc_w", "ccbc", "sem", "fused", "quality", "components", "score"):
        table.add_column(col, justify="left" if col in ("paper", "components") else "right", overflow="fold")
    for r in items:
        comp = "\n".join(f"{k[:3]} {v:.2f}" for k, v in r.components.items())
        table.add_row(str(r.rank), f"{escape(_short(r.title, 60))}\n[dim]{escape(printable(r.paper_id or r.work_id, one_line=True))}[/dim]", str(r.year or ""),
                      str(r.citation_count if r.citation_count is not None else ""), f"{r.ccbc_weighted:.3f}",
                      f"{r.ccbc_naive:.3g}", f"{r.semantic:.3f}", f"{r.fused:.3f}", f"{r.quality:.3f}", comp, f"{r.score:.3f}")
    console.print(table)
    _print_related_footer(searcher, items, console)


def _print_related_footer(searcher, items, console: Console) -> None:
    b, a = searcher.settings.query_related_quality_weight, searcher.settings.query_related_semantic_weight
    console.print(f"score = {1 - b:g} x fused + {b:g} x quality; fused = {1 - a:g} x CCBC (weighted, over the best) + {a:g} x cosine; "
                  "quality = mean of cit(ations), vel(ocity), aut(hors' record), rec(ency)")
    if not items:
        console.print("no related papers (no citation links and no vectors)")


def print_recommend(resp) -> None:
    """One paper per entry: rank, score, id, year and title, then why, continuation lines under the title."""
    from pipeline.cli.console import echo

    negs = f", away from {', '.join(resp.negatives)}" if resp.negatives else ""
    echo(f"recommend: {len(resp.results)} paper(s) like {', '.join(resp.positives)}{negs} (snapshot {resp.snapshot_id})")
    pad = " " * 13
    for r in resp.results:
        echo(f"{r.rank:>3}  {r.score:6.3f}  {r.paper_id}  {r.year or '----'}  {r.title or ''}", indent=pad)
        echo(f"{pad}why: {r.why() or '-'}", indent=pad + "     ")


def print_path(res, max_length: int) -> None:
    """Every shortest path, one hop a line: how it links to the hop before (``cites``, ``cited by``), id, year
    and title (continuation lines indented under the id)."""
    from pipeline.cli.console import echo

    if res.length is None:
        echo(f"path: no citation path of at most {max_length} hops between {res.source} and {res.target} "
             f"(snapshot {res.snapshot_id})")
        return
    more = " (more not shown: raise --limit)" if res.truncated else ""
    echo(f"path: {len(res.paths)} shortest path(s) of {res.length} hop(s) between {res.source} and {res.target}{more}")
    for n, p in enumerate(res.paths, start=1):
        echo(f"#{n}")
        for h in p:
            arrow = {"cites": "  cites  ", "cited_by": "cited by "}.get(h.link or "", "")
            echo(f"  {arrow:>9} {h.paper_id or h.work_id}  {h.year or '----'}  {h.title or ''}", indent=" " * 12)
