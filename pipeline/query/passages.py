"""A paper's passages read from a catalog: all of them, one section's, or those on a range of pages.

Reads the catalog's ``passages`` view (what the search indexes: the PDF's body, acknowledgements and
appendix chunks, plus one abstract passage per paper; ``docs/tables.md``) on any DuckDB connection
holding the catalog (a snapshot's ``catalog.duckdb``, or the warehouse). Every user value is bound as a
query parameter. A selection that matches nothing is an error naming what the paper has (its sections,
its pages), so a caller can correct the request.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.errors import UnknownPaper, UserError

MAX_LIMIT = 200
MAX_SECTION_CHARS = 200


@dataclass
class Passage:
    chunk_id: str
    ordinal: int  # reading order within the paper; -1 for the abstract passage
    kind: str  # 'body' (a chunk of the PDF's text) or 'abstract'
    section: str | None
    role: str  # 'body', 'acknowledgements', 'appendix' or 'abstract'
    page_start: int | None  # PDF pages (None for the abstract passage)
    page_end: int | None
    text: str


@dataclass
class PassagePage:
    paper_id: str
    title: str | None
    total: int  # passages matching the selection (before offset and limit)
    offset: int
    limit: int
    passages: list[Passage] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _paper_id(con, paper_id: str) -> str:
    from pipeline.query.records import resolve_ids

    (kind, pid), = resolve_ids(con, [paper_id])
    if kind == "work":
        raise UnknownPaper(f"{paper_id!r} is a cited work outside the corpus: the snapshot holds no text of it")
    return pid


def _check(section: str | None, page_from: int | None, page_to: int | None, limit: int, offset: int) -> str | None:
    if section is not None:
        if not isinstance(section, str) or len(section) > MAX_SECTION_CHARS or any(ord(c) < 32 for c in section):
            raise UserError(f"the section must be text of at most {MAX_SECTION_CHARS} characters, without control characters")
        section = section.strip() or None
    for name, page in (("page_from", page_from), ("page_to", page_to)):
        if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
            raise UserError(f"{name} must be a page number (1 or more), got {page!r}")
    if page_from is not None and page_to is not None and page_from > page_to:
        raise UserError(f"page_from {page_from} is after page_to {page_to}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise UserError(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UserError(f"offset must be 0 or more, got {offset!r}")
    return section


def paper_passages(con, paper_id: str, *, section: str | None = None, page_from: int | None = None,
                   page_to: int | None = None, limit: int = 50, offset: int = 0) -> PassagePage:
    """The passages of ``paper_id`` in reading order (the abstract first). ``section``: only those whose
    section heading contains it (case-insensitive: ``"introduction"`` matches ``"1 Introduction"``;
    ``"abstract"`` is the abstract passage); ``page_from``/``page_to``: only those on a page of that range
    (the abstract, which has no page, is left out). UserError when the selection matches nothing."""
    section = _check(section, page_from, page_to, limit, offset)
    pid = _paper_id(con, paper_id)
    title = con.execute("SELECT title FROM papers WHERE paper_id = ?", [pid]).fetchone()[0]
    where = ["paper_id = ?"]
    params: list[Any] = [pid]
    if section is not None:
        where.append("contains(lower(coalesce(section, '')), lower(?))")
        params.append(section)
    if page_from is not None:
        where.append("page_end >= ?")
        params.append(page_from)
    if page_to is not None:
        where.append("page_start <= ?")
        params.append(page_to)
    cond = " AND ".join(where)
    total = con.execute(f"SELECT count(*) FROM passages WHERE {cond}", params).fetchone()[0]
    if not total and (section is not None or page_from is not None or page_to is not None):
        raise UserError(_nothing_matches(con, pid, section, page_from, page_to))
    rows = con.execute(f"""
        SELECT chunk_id, ordinal, kind, section, role, page_start, page_end, text FROM passages
        WHERE {cond} ORDER BY ordinal, chunk_id LIMIT ? OFFSET ?""", [*params, limit, offset]).fetchall()
    return PassagePage(paper_id=pid, title=title, total=int(total), offset=offset, limit=limit,
                       passages=[Passage(*r) for r in rows])


def _nothing_matches(con, pid: str, section: str | None, page_from: int | None, page_to: int | None) -> str:
    """One line: what was asked, and the sections and pages the paper has."""
    asked = []
    if section is not None:
        asked.append(f"in a section matching {section!r}")
    if page_from is not None or page_to is not None:
        asked.append(f"on pages {page_from or 1}-{page_to if page_to is not None else '...'}")
    sections = [s for (s,) in con.execute(
        "SELECT section FROM passages WHERE paper_id = ? GROUP BY section ORDER BY min(ordinal)", [pid]).fetchall() if s]
    first, last = con.execute("SELECT min(page_start), max(page_end) FROM passages WHERE paper_id = ?", [pid]).fetchone()
    shown = ", ".join(repr(s) for s in sections[:20]) + (f" and {len(sections) - 20} more" if len(sections) > 20 else "")
    pages = f"pages {first}-{last}" if first is not None else "no pages (no full text: only its abstract)"
    return f"paper {pid} has no passage {' and '.join(asked)}; it has sections {shown or 'none'} and {pages}"
