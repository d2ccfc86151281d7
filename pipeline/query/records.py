"""Bibliographic records of papers for exports (:mod:`pipeline.exports`), read from a catalog.

Works on any DuckDB connection holding the catalog tables (a snapshot's ``catalog.duckdb``, or the
warehouse). Ids are corpus paper ids, their external ids (arXiv id, collection docno) when unambiguous,
or citation-graph work ids (S2 papers outside the corpus, as `related` lists them); and what people paste for them
(:mod:`pipeline.query.id_forms`): ``arXiv:1706.03762``, ``1706.03762v5``, arXiv and doi.org addresses, DOIs, Semantic
Scholar pages, or a title only one corpus paper has. Every query binds
the ids as parameters.
"""

from __future__ import annotations

from pipeline.errors import UnknownPaper, UserError
from pipeline.exports import BibRecord
from pipeline.query import id_forms

MAX_IDS = 1000


def resolve_ids(con, ids: list[str]) -> list[tuple[str, str]]:
    """[(kind, id)] in the given order, duplicates dropped: kind 'paper' (papers.paper_id) or 'work'
    (works.work_id of a work outside the corpus). UnknownPaper names every id that matches nothing."""
    clean: list[str] = []
    for i in ids:
        s = (i or "").strip() if isinstance(i, str) else ""
        if not s:
            raise UserError("a paper id is empty")
        if s not in clean:
            clean.append(s)
    if not clean:
        raise UserError("no paper ids given")
    if len(clean) > MAX_IDS:
        raise UserError(f"{len(clean)} paper ids; the limit is {MAX_IDS}")
    papers = {r[0] for r in con.execute("SELECT paper_id FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
                                        [clean]).fetchall()}
    ext: dict[str, list[str]] = {}
    for pid, e in con.execute("SELECT paper_id, external_id FROM papers WHERE external_id IN (SELECT unnest(?::VARCHAR[]))",
                              [clean]).fetchall():
        ext.setdefault(e, []).append(pid)
    works: dict[str, str | None] = dict(con.execute(
        "SELECT work_id, paper_id FROM works WHERE work_id IN (SELECT unnest(?::VARCHAR[]))", [clean]).fetchall())
    out: list[tuple[str, str]] = []
    unknown: list[str] = []
    found: dict[str, tuple[str, str]] = {}
    for s in clean:
        if s in papers:
            found[s] = ("paper", s)
        elif len(ext.get(s, [])) == 1:
            found[s] = ("paper", ext[s][0])
        elif s in works:
            linked = works[s]
            found[s] = ("paper", linked) if linked else ("work", s)
    found.update(_pasted(con, [s for s in clean if s not in found]))
    for s in clean:
        item = found.get(s)
        if item is None:
            unknown.append(s)
        elif item not in out:
            out.append(item)
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise UnknownPaper(f"unknown paper id{'s' if len(unknown) > 1 else ''} {shown}")
    return out


def _pasted(con, typed: list[str]) -> dict[str, tuple[str, str]]:
    """What the ids the catalog does not hold as given name, read as people paste them
    (:mod:`pipeline.query.id_forms`): an arXiv id with a prefix, a version or as a URL; a DOI; a Semantic Scholar page;
    else a title that one corpus paper has (case and spacing aside)."""
    if not typed:
        return {}
    arxiv = {s: a for s in typed if (a := id_forms.arxiv_id(s))}
    dois = {s: d for s in typed if (d := id_forms.doi(s))}
    s2 = {s: h for s in typed if (h := id_forms.s2_paper(s))}
    titles = {s: id_forms.title_key(s) for s in typed if " " in s.strip() and s not in arxiv and s not in dois and s not in s2}
    out: dict[str, tuple[str, str]] = {}
    out.update(_named(con, arxiv, _ARXIV_PAPERS, "arxiv_id", "arxiv:"))
    out.update(_named(con, dois, _DOI_PAPERS, "lower(doi)", "doi:"))
    if s2:
        works = _works(con, "work_id", sorted(set(s2.values())))
        out.update((s, works[h]) for s, h in s2.items() if h in works)
    if titles:  # the titles holding each one's longest word first: the regexp then runs on a few (millions at arXiv's size)
        keys = sorted(set(titles.values()))
        words = [max(k.split(), key=len) for k in keys]
        keyed = dict(con.execute(rf"""
            SELECT rtrim(lower(regexp_replace(trim(title), '\s+', ' ', 'g')), '.') AS k, any_value(paper_id) FROM papers
            WHERE ({' OR '.join(['contains(lower(title), ?)'] * len(words))}) AND k IN (SELECT unnest(?::VARCHAR[]))
            GROUP BY k HAVING count(*) = 1""", [*words, keys]).fetchall())
        out.update((s, ("paper", keyed[k])) for s, k in titles.items() if k in keyed)
    return out


# {id: the one corpus paper it names}: arXiv ids as paper ids or external ids, DOIs (lower case)
_ARXIV_PAPERS = """
    SELECT i, any_value(pid) FROM (
        SELECT paper_id AS i, paper_id AS pid FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))
        UNION ALL SELECT external_id, paper_id FROM papers WHERE external_id IN (SELECT unnest(?::VARCHAR[])))
    GROUP BY i HAVING count(DISTINCT pid) = 1"""
_DOI_PAPERS = """
    SELECT lower(doi) AS i, any_value(paper_id) FROM papers WHERE lower(doi) IN (SELECT unnest(?::VARCHAR[]))
    GROUP BY i HAVING count(*) = 1"""


def _named(con, forms: dict[str, str], papers_sql: str, column: str, prefix: str) -> dict[str, tuple[str, str]]:
    """{typed: what it names} for ``forms`` ({typed: arXiv id or DOI}): the corpus paper ``papers_sql`` finds, else
    the work whose ``column`` holds it or whose id is ``prefix`` + it (the works a PDF's references made)."""
    if not forms:
        return {}
    ids = sorted(set(forms.values()))
    papers = dict(con.execute(papers_sql, [ids] * papers_sql.count("?")).fetchall())
    works = _works(con, column, ids) | _works(con, "work_id", [prefix + i for i in ids])
    out = {}
    for typed, key in forms.items():
        hit = ("paper", papers[key]) if key in papers else works.get(key) or works.get(prefix + key)
        if hit:
            out[typed] = hit
    return out


def _works(con, column: str, values: list[str]) -> dict[str, tuple[str, str]]:
    """{value of ``column``: the corpus paper of that work, else the work}, for the works whose ``column`` is one of
    ``values`` (a value several works hold names none of them)."""
    rows = con.execute(f"SELECT {column} AS v, any_value(work_id), any_value(paper_id), count(DISTINCT coalesce(paper_id, "
                       f"work_id)) FROM works WHERE {column} IN (SELECT unnest(?::VARCHAR[])) GROUP BY v",
                       [values]).fetchall()
    return {v: ("paper", pid) if pid else ("work", wid) for v, wid, pid, n in rows if n == 1}


def bib_records(con, ids: list[str]) -> list[BibRecord]:
    """One :class:`BibRecord` per id (see :func:`resolve_ids`), in the given order."""
    resolved = resolve_ids(con, ids)
    paper_ids = [i for k, i in resolved if k == "paper"]
    work_ids = [i for k, i in resolved if k == "work"]
    recs: dict[tuple[str, str], BibRecord] = {}
    if paper_ids:
        rows = con.execute("""
            SELECT p.paper_id, p.source, p.external_id, p.title, p.abstract, p.year,
                   CAST(p.published AS VARCHAR), p.doi, p.primary_category,
                   p.categories, p.journal_ref, p.venue,
                   (SELECT list(pa.name ORDER BY pa.position) FROM paper_authors pa WHERE pa.paper_id = p.paper_id)
            FROM papers p WHERE p.paper_id IN (SELECT unnest(?::VARCHAR[]))""", [paper_ids]).fetchall()
        for (pid, source, ext, title, abstract, year, published, doi, prim, cats, jref, venue, authors) in rows:
            if published and source != "arxiv":  # collections know the month (stored as its first day)
                published = published[:7]
            recs[("paper", pid)] = BibRecord(
                id=pid, title=title, authors=list(authors or []), year=year, published=published, doi=doi,
                arxiv_id=ext if source == "arxiv" else None, primary_category=prim if source == "arxiv" else None,
                categories=list(cats or []) if source == "arxiv" else [], journal=jref or venue or None,
                abstract=abstract, source=source)
    if work_ids:
        from pipeline.query.reading.cards import work_cards

        # the authors as Semantic Scholar or, for a work only reference lists name, as one of them prints them
        cards = work_cards(con, work_ids)
        rows = con.execute("""
            SELECT w.work_id, w.title, w.year, CAST(w.publication_date AS VARCHAR), w.doi, w.arxiv_id, w.venue, w.detail
            FROM works w WHERE w.work_id IN (SELECT unnest(?::VARCHAR[]))""", [work_ids]).fetchall()
        for wid, title, year, published, doi, arxiv_id, venue, detail in rows:
            card = cards.get(wid)
            recs[("work", wid)] = BibRecord(
                id=wid, title=title, authors=[n for n in (card.authors if card else []) if n], year=year,
                published=published, doi=doi, arxiv_id=arxiv_id, journal=venue or None,
                source="pdf" if detail == "pdf" else "s2",
                # its Semantic Scholar page when it has one (not a work of a reference list's own: 'ref:...')
                url=None if (arxiv_id or doi) else (card.links.s2 if card else None))
    return [recs[r] for r in resolved if r in recs]


def export_text(snapshot, ids: list[str], fmt: str) -> str:
    """``ids`` (see :func:`resolve_ids`) of an opened :class:`~pipeline.query.snapshot.Snapshot`, rendered
    in ``fmt`` (bibtex | ris | csl-json). UserError for an unknown format, UnknownPaper for unknown ids."""
    from pipeline.exports import check_format, render

    try:
        fmt = check_format(fmt)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not ids:
        return render(fmt, [])
    con = snapshot.catalog()
    try:
        return render(fmt, bib_records(con, ids))
    finally:
        con.close()
