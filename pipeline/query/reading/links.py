"""A paper's links to other works: its references (the printed bibliography first, then the citation edges), the
papers citing it, each with the sentences that cite (:mod:`pipeline.query.contexts`), and Connected Papers' prior and
derivative works of a set of papers."""

from __future__ import annotations

from typing import Any

from pipeline.query import by_cited
from pipeline.query.contexts import MAX_CONTEXTS, Context, Entry, as_context, body_of, cited_at, citing_text, sentences
from pipeline.query.reading.args import LINK_SORTS, MAX_LIMIT, REFERENCE_SORTS, _choice, _limit, resolve
from pipeline.query.reading.cards import make_links, work_cards
from pipeline.query.reading.models import CountedPaper, PaperCard, PriorDerivative, Reference, ReferencePage


# one row per listed work: (work_id, source, ordinal, page, raw, method, influential, intents, printed title,
# printed year, printed authors, printed venue, printed doi, printed arxiv id, sort year, sort citations)
_REFERENCES = """
WITH mine AS (SELECT unnest(?::VARCHAR[]) AS work_id),
pdf AS (
    SELECT r.ordinal, r.page, r.raw, r.title, r.year, r.authors, r.venue, r.doi, r.arxiv_id,
           l.cited_work_id, l.method
    FROM paper_references r LEFT JOIN reference_links l USING (reference_id)
    WHERE r.paper_id = ?),
edges AS (
    SELECT cited_work_id AS work_id, min(source) AS source, bool_or(is_influential) AS influential,
           any_value(intents) AS intents
    FROM citations WHERE citing_work_id IN (SELECT work_id FROM mine)
    GROUP BY cited_work_id),
rows AS (
    SELECT pdf.cited_work_id AS work_id, coalesce(e.source, 'pdf') AS source, pdf.ordinal, pdf.page, pdf.raw,
           pdf.method, e.influential, e.intents, pdf.title AS p_title, pdf.year AS p_year, pdf.authors AS p_authors,
           pdf.venue AS p_venue, pdf.doi AS p_doi, pdf.arxiv_id AS p_arxiv
    FROM pdf LEFT JOIN edges e ON e.work_id = pdf.cited_work_id
    UNION ALL
    SELECT e.work_id, e.source, NULL, NULL, NULL, NULL, e.influential, e.intents, NULL, NULL, NULL, NULL, NULL, NULL
    FROM edges e
    WHERE e.work_id NOT IN (SELECT cited_work_id FROM pdf WHERE cited_work_id IS NOT NULL))
"""

_CITED_BY = """
WITH mine AS (SELECT unnest(?::VARCHAR[]) AS work_id),
rows AS (
    SELECT citing_work_id AS work_id, min(source) AS source, CAST(NULL AS INTEGER) AS ordinal,
           CAST(NULL AS INTEGER) AS page, CAST(NULL AS VARCHAR) AS raw, CAST(NULL AS VARCHAR) AS method,
           bool_or(is_influential) AS influential, any_value(intents) AS intents,
           CAST(NULL AS VARCHAR) AS p_title, CAST(NULL AS INTEGER) AS p_year, CAST(NULL AS VARCHAR[]) AS p_authors,
           CAST(NULL AS VARCHAR) AS p_venue, CAST(NULL AS VARCHAR) AS p_doi, CAST(NULL AS VARCHAR) AS p_arxiv
    FROM {cited_by}
    WHERE cited_work_id IN (SELECT work_id FROM mine) AND citing_work_id NOT IN (SELECT work_id FROM mine)
    GROUP BY citing_work_id)
"""

# the listed rows with their sort keys (a corpus paper's year and count win over the work's)
_KEYED = """,
keyed AS (
    SELECT r.*, coalesce(p.year, w.year, r.p_year) AS k_year,
           coalesce(p.citation_count, m.citation_count, w.citation_count) AS k_cites,
           coalesce(p.title, w.title, r.p_title, r.raw) AS k_title
    FROM rows r
    LEFT JOIN works w ON w.work_id = r.work_id
    LEFT JOIN papers p ON p.paper_id = w.paper_id
    LEFT JOIN paper_metrics m ON m.work_id = r.work_id)
"""

_ORDER = {
    "order": "ordinal NULLS LAST, k_cites DESC NULLS LAST, k_year DESC NULLS LAST, k_title, work_id",
    "citations": "k_cites DESC NULLS LAST, k_year DESC NULLS LAST, k_title, work_id, ordinal",
    "year": "k_year DESC NULLS LAST, k_cites DESC NULLS LAST, k_title, work_id, ordinal",
}


def _listing(con, head: str, params: list[Any], *, limit: int, offset: int, sort: str) -> ReferencePage:
    limit, offset = _limit(limit, offset)
    sort = _choice("sort", sort, LINK_SORTS)
    base = head + _KEYED
    # the page and the total in one pass (the rows are found by a scan of citations: a count apart scanned it again)
    rows = by_cited.execute(con, base + f"""
        SELECT work_id, source, ordinal, page, raw, method, influential, intents, p_title, p_year, p_authors,
               p_venue, p_doi, p_arxiv, count(*) OVER () AS total
        FROM keyed ORDER BY {_ORDER[sort]} LIMIT ? OFFSET ?""", [*params, limit, offset]).fetchall()
    total = rows[0][-1] if rows else by_cited.execute(con, head + "SELECT count(*) FROM rows", params).fetchone()[0]
    rows = [r[:-1] for r in rows]
    known = work_cards(con, [r[0] for r in rows if r[0]])
    items: list[Reference] = []
    for (wid, source, ordinal, page, raw, method, influential, intents, title, year, authors, venue, doi, arxiv) in rows:
        card = known.get(wid) if wid else None
        if card is None or (method == "unmatched" and not card.paper_id):  # as printed
            base_card = PaperCard(work_id=wid, external_id=arxiv or doi, title=title or (card.title if card else None),
                                  authors=list(authors or (card.authors if card else [])),
                                  year=year or (card.year if card else None), venue=venue,
                                  citation_count=card.citation_count if card else None,
                                  links=make_links(arxiv_id=arxiv, doi=doi))
        else:
            base_card = card
        items.append(Reference(**base_card.__dict__, source=source, ordinal=ordinal, page=page, raw=raw, method=method,
                               is_influential=influential, intents=list(intents or [])))
    return ReferencePage(total=int(total), offset=offset, limit=limit, sort=sort, items=items)


def references(con, paper_id: str, *, limit: int = 20, offset: int = 0, sort: str = "order") -> ReferencePage:
    """The papers ``paper_id`` cites: its printed bibliography first (``order``: as printed), then the
    citation edges no printed entry gave; or sorted by ``citations``, ``year`` (newest first) or ``mentions`` (the
    most cited in the paper's own text first). A printed entry has the sentences of the paper that cite it
    (``contexts``) and how many do (``mentions``)."""
    pid, works = resolve(con, paper_id)
    if _choice("sort", sort, REFERENCE_SORTS) == "mentions":
        return _most_mentioned(con, pid, works, limit=limit, offset=offset)
    page = _listing(con, _REFERENCES, [works, pid], limit=limit, offset=offset, sort=sort)
    _add_contexts(con, pid, page.items)
    return page


def _add_contexts(con, pid: str | None, items: list[Reference]) -> None:
    """Each printed entry of ``items`` (references of ``pid``) gets the sentences of ``pid``'s text that cite it."""
    raws = [r.raw for r in items if r.raw]
    if pid and raws:
        entries = con.execute("SELECT paper_id, raw, authors, year FROM paper_references WHERE paper_id = ? "
                              "AND raw IN (SELECT unnest(?::VARCHAR[]))", [pid, raws]).fetchall()
        found = _contexts(con, entries)
        for r in items:
            if r.raw and (pid, r.raw) in found:
                r.contexts, r.mentions = found[(pid, r.raw)]


def _most_mentioned(con, pid: str | None, works: list[str], *, limit: int, offset: int) -> ReferencePage:
    """The references sorted by how many sentences of the paper cite them (as printed on ties; entries no PDF gave
    last): every one read, then the page cut."""
    limit, offset = _limit(limit, offset)
    every: list[Reference] = []
    while True:
        part = _listing(con, _REFERENCES, [works, pid], limit=MAX_LIMIT, offset=len(every), sort="order")
        every += part.items
        if not part.items or len(every) >= part.total:
            break
    _add_contexts(con, pid, every)
    every.sort(key=lambda r: (-(r.mentions or 0), r.ordinal is None, r.ordinal or 0))
    return ReferencePage(total=len(every), offset=offset, limit=limit, sort="mentions", items=every[offset:offset + limit])


def cited_by(con, paper_id: str, *, limit: int = 20, offset: int = 0, sort: str = "citations") -> ReferencePage:
    """The papers citing ``paper_id`` (most cited first, or by ``year``, newest first), each with the sentences of
    its text that cite it (``contexts``: from its PDF, where its reference list names the paper)."""
    _, works = resolve(con, paper_id)
    page = _listing(con, _CITED_BY, [works], limit=limit, offset=offset, sort=sort)
    citers = [r.paper_id for r in page.items if r.paper_id]
    if citers:
        entries = con.execute("""
            SELECT r.paper_id, r.raw, r.authors, r.year
            FROM reference_links l JOIN paper_references r USING (reference_id)
            WHERE l.cited_work_id IN (SELECT unnest(?::VARCHAR[])) AND l.paper_id IN (SELECT unnest(?::VARCHAR[]))
              AND r.paper_id IN (SELECT unnest(?::VARCHAR[]))  -- both tables are ordered by the citing paper
            ORDER BY r.paper_id, r.ordinal""", [works, citers, citers]).fetchall()
        found = _contexts(con, entries)
        for r in page.items:
            mine = [found[(pid, raw)] for pid, raw, _, _ in entries if pid == r.paper_id and (pid, raw) in found]
            if mine:  # its entries for the paper (one, or a duplicate printed twice)
                r.contexts = [c for cs, _ in mine for c in cs][:MAX_CONTEXTS]
                r.mentions = sum(n for _, n in mine)
    return page


def _contexts(con, entries: list[tuple[str, str, list[str] | None, int | None]],
              ) -> dict[tuple[str, str], tuple[list[Context], int]]:
    """{(citing paper, entry as printed): (the first sentences of that paper's text that cite the entry, how many
    do)} for reference-list entries (paper_id, raw, authors, year): :mod:`pipeline.query.contexts` over the paper's
    chunks."""
    papers = sorted({e[0] for e in entries if e[1]})
    if not papers:
        return {}
    rows = con.execute("SELECT paper_id, char_start, char_end, role, page_start, section, text FROM chunks "
                       "WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND char_start IS NOT NULL "
                       "ORDER BY paper_id, char_start", [papers]).fetchall()
    by_paper: dict[str, list[tuple]] = {}
    for row in rows:
        by_paper.setdefault(row[0], []).append(row[1:])
    out: dict[tuple[str, str], tuple[list[Context], int]] = {}
    for pid, chunks in by_paper.items():
        text = citing_text(sentences(body_of((a, b, t) for a, b, _, _, _, t in chunks),
                                     [(a, b, role, page, section) for a, b, role, page, section, _ in chunks]))
        for e_pid, raw, authors, year in entries:
            if e_pid == pid and raw:
                at = cited_at(text, Entry(raw, tuple(authors or ()), year))
                out[(pid, raw)] = [as_context(text, i, span) for i, span in at[:MAX_CONTEXTS]], len(at)
    return out


def link_counts(con, paper_id: str, works: list[str] | None = None) -> tuple[int, int]:
    """(references listed, citing papers listed) of a paper: the totals of :func:`references` and
    :func:`cited_by`. ``works``: its work ids as :func:`resolve` gives them, when the caller has them."""
    pid, works = (paper_id, works) if works is not None else resolve(con, paper_id)
    refs = con.execute(_REFERENCES + "SELECT count(*) FROM rows", [works, pid]).fetchone()[0]
    cites = by_cited.execute(con, _CITED_BY + "SELECT count(*) FROM rows", [works]).fetchone()[0]
    return int(refs), int(cites)


def prior_and_derivative(con, ids: list[str], *, limit: int = 10, min_count: int = 2,
                         exclude: list[str] | None = None) -> PriorDerivative:
    """For a set of papers (corpus paper ids or work ids: a paper and its connected papers), the works cited by
    the most of them (prior works) and the works citing the most of them (derivative works), each cited by /
    citing at least ``min_count`` of the set; ties broken by citation count. Ids that match nothing are ignored;
    the papers of ``exclude`` (e.g. the paper whose neighbourhood it is) are left out of both lists."""
    limit, _ = _limit(limit, 0)
    clean = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i.strip()]
    # each given id -> its works (a corpus paper may have its S2 work and its own)
    works_of = """
        WITH given AS (SELECT unnest(?::VARCHAR[]) AS node)
        SELECT node, work_id FROM given JOIN works ON works.paper_id = given.node
        UNION SELECT node, node FROM given WHERE node IN (SELECT work_id FROM works)"""
    # the given ids' works and those of ``exclude`` in one query (each a scan of works by paper id)
    out = [i for i in dict.fromkeys(exclude or []) if isinstance(i, str)]
    both = con.execute(works_of, [list(dict.fromkeys([*clean, *out]))]).fetchall()
    given, excluded = set(clean), set(out)
    nodes = [(n, w) for n, w in both if n in given]
    left_out = [w for n, w in both if n in excluded]
    node_ids = [n for n, _ in nodes]
    work_ids = [w for _, w in nodes]
    found = len(set(node_ids))

    def ranked(near: str, far: str) -> list[tuple[str, int]]:
        table = "{cited_by}" if near == "cited_work_id" else "citations"  # (the table whose files are sorted by `near`)
        return [(w, int(n)) for w, n, _ in by_cited.execute(con, f"""
            WITH g AS (SELECT unnest(?::VARCHAR[]) AS node, unnest(?::VARCHAR[]) AS work_id)
            SELECT c.{far} AS work_id, count(DISTINCT g.node) AS n,
                   max(coalesce(m.citation_count, 0)) AS cites
            FROM {table} c JOIN g ON c.{near} = g.work_id
            LEFT JOIN paper_metrics m ON m.work_id = c.{far}
            WHERE c.{far} NOT IN (SELECT unnest(?::VARCHAR[]))
            GROUP BY c.{far} HAVING count(DISTINCT g.node) >= ?
            ORDER BY n DESC, cites DESC, work_id LIMIT ?""", [node_ids, work_ids, left_out, min_count, limit]).fetchall()]

    in_set = set(work_ids)

    def counted(pairs: list[tuple[str, int]]) -> list[CountedPaper]:
        known = work_cards(con, [w for w, _ in pairs])
        return [CountedPaper(**(known.get(w) or PaperCard(work_id=w)).__dict__, count=n, in_set=w in in_set)
                for w, n in pairs]

    prior = counted(ranked("citing_work_id", "cited_work_id")) if node_ids else []
    derivative = counted(ranked("cited_work_id", "citing_work_id")) if node_ids else []
    return PriorDerivative(papers=found, prior=prior, derivative=derivative)
