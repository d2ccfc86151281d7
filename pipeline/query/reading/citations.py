"""Citations in text and cited works: the works a passage's in-text citations name, the works outside the corpus a
search's results cite and whose title the query names, and how the corpus papers print a work."""

from __future__ import annotations

import math
from typing import Any

from pipeline.query import by_cited
from pipeline.query.contexts import Entry, markers_in
from pipeline.query.reading.args import _limit
from pipeline.query.reading.cards import work_cards
from pipeline.query.reading.models import NamedWork, PrintedEntry


def passage_citations(con, passages: list[tuple[str, str]], listed: dict[str, list[tuple]] | None = None,
                      ) -> list[list[dict[str, Any]]]:
    """For each (paper id, passage text): the in-text citations of the text that its paper's reference list resolves
    (:func:`pipeline.query.contexts.markers_in`), each ``{"start", "end", "works"}``: the span in the text and the
    works it cites (``paper_id``, ``work_id``, ``title``, ``year``, ``raw`` as printed). None for a paper without a
    read reference list. ``listed``: the reference lists read before (paper id -> its entries), for a server to keep
    across searches of one snapshot; the lists read now are added to it."""
    by_paper = listed if listed is not None else {}
    papers = sorted({pid for pid, text in passages if text and pid not in by_paper})
    rows = con.execute("""
        SELECT r.paper_id, r.raw, r.authors, r.year, r.title, l.cited_work_id
        FROM paper_references r LEFT JOIN reference_links l USING (reference_id)
        WHERE r.paper_id IN (SELECT unnest(?::VARCHAR[])) AND r.raw IS NOT NULL
        ORDER BY r.paper_id, r.ordinal""", [papers]).fetchall() if papers else []
    fresh: dict[str, list[tuple]] = {pid: [] for pid in papers}
    for row in rows:
        fresh[row[0]].append(row[1:])
    by_paper.update(fresh)  # whole lists at once: another search may read ``listed`` meanwhile
    found = []
    for pid, text in passages:
        mine = by_paper.get(pid, [])
        marks = markers_in(text or "", [Entry(raw, tuple(authors or ()), year) for raw, authors, year, _, _ in mine])
        found.append([(start, end, [mine[i] for i in cited]) for start, end, cited in marks])
    # the title and year of the works cited (a corpus paper's own), for those only
    cited_works = sorted({e[4] for marks in found for _, _, entries in marks for e in entries if e[4]})
    known = {w: (pid, title, year) for w, pid, title, year in con.execute("""
        SELECT w.work_id, w.paper_id, coalesce(p.title, w.title), coalesce(p.year, w.year)
        FROM works w LEFT JOIN papers p ON p.paper_id = w.paper_id
        WHERE w.work_id IN (SELECT unnest(?::VARCHAR[]))""", [cited_works]).fetchall()} if cited_works else {}
    return [[{"start": start, "end": end, "works": [_cited(e, known) for e in entries]} for start, end, entries in marks]
            for marks in found]


def _cited(entry: tuple, known: dict[str, tuple]) -> dict[str, Any]:
    raw, _, year, title, work_id = entry
    pid, known_title, known_year = known.get(work_id, (None, None, None))
    return {"paper_id": pid, "work_id": work_id, "title": known_title or title, "year": known_year or year, "raw": raw}


def cited_titles(con, paper_ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """paper id -> (work id, title) of each work outside the corpus that the corpus paper cites and whose title is
    known, for each of ``paper_ids``. Three lookups by lists of keys rather than one join: each list is a filter the
    Parquet scan prunes files and row groups by (``citations`` is in citing work order, ``works`` in work id order),
    where a join scanned both tables whole (at 100,000 papers, 36 ms against 44 ms median: BENCHMARKS.md)."""
    found: dict[str, list[tuple[str, str]]] = {pid: [] for pid in dict.fromkeys(paper_ids)}
    if not found:
        return found
    own = {pid: pid for pid in found}  # a collection's paper is its own work
    own.update(con.execute("SELECT work_id, paper_id FROM works WHERE paper_id = ANY(?::VARCHAR[])",
                           [list(found)]).fetchall())
    edges = con.execute("SELECT DISTINCT citing_work_id, cited_work_id FROM citations "
                        "WHERE citing_work_id = ANY(?::VARCHAR[])", [list(own)]).fetchall()
    titles = dict(con.execute("SELECT work_id, title FROM works WHERE work_id = ANY(?::VARCHAR[]) "
                              "AND paper_id IS NULL AND title IS NOT NULL",
                              [sorted({cited for _, cited in edges})]).fetchall()) if edges else {}
    seen: set[tuple[str, str]] = set()  # (a paper's two works may cite the same one)
    for citing, cited in sorted(edges):
        if cited in titles and (own[citing], cited) not in seen:
            seen.add((own[citing], cited))
            found[own[citing]].append((cited, titles[cited]))
    return found


def may_cite_outside(manifest: dict) -> bool:
    """Whether a snapshot (its manifest) holds works besides its papers, that its papers may cite: a test
    collection's works are its papers alone, and its searches skip :func:`cited_works_named`."""
    counts = manifest.get("counts") or {}
    return int(counts.get("works") or 0) > int(counts.get("papers") or 0)


def cited_works_named(con, query: str, paper_ids: list[str], *, limit: int = 3,
                      known: dict[str, list[tuple[str, str]]] | None = None) -> list[NamedWork]:
    """The works outside the corpus that the corpus papers ``paper_ids`` (a search's results) cite and whose title
    ``query`` names (:func:`pipeline.query.titles.names_title`). A search for a cited work's title finds the papers
    citing it, so only their references are read (:func:`cited_titles`), not every work's title. A title the query
    names whole comes first, then the share named weighted by the corpus papers citing it (1 + log2(1 + n): "sequence
    to sequence learning" names the classic four papers cite before a title it names more of, cited by one), then
    the results citing it. ``known``: the results' cited titles read before (paper id -> its list), for a server to
    keep across searches of one snapshot; the lists read now are added to it."""
    from pipeline.query.titles import may_name_a_title, names_title

    if not paper_ids or not may_name_a_title(query):
        return []
    lists = known if known is not None else {}
    missing = [p for p in dict.fromkeys(paper_ids) if p not in lists]
    if missing:
        lists.update(cited_titles(con, missing))  # whole lists at once: another search may read ``known`` meanwhile
    citing: dict[str, int] = {}
    share: dict[str, float] = {}
    for pid in dict.fromkeys(paper_ids):
        for wid, title in lists.get(pid, ()):
            if wid not in share:
                share[wid] = names_title(query, title)
            if share[wid] > 0:
                citing[wid] = citing.get(wid, 0) + 1
    if not citing:
        return []
    # the corpus papers citing each: its in-degree in the graph (paper_metrics is in work id order, where citations
    # would be scanned whole by cited work); a work the last graph run did not see counts the results citing it
    here = dict(citing)
    here.update(con.execute("SELECT work_id, in_degree FROM paper_metrics WHERE work_id = ANY(?::VARCHAR[])",
                            [list(citing)]).fetchall())
    best = sorted(citing, key=lambda w: (share[w] < 1.0, -share[w] * (1 + math.log2(1 + here.get(w, 0))),
                                         -citing[w], w))[:max(limit, 0)]
    cards_of = work_cards(con, best)
    return [NamedWork(**cards_of[w].__dict__, match=round(share[w], 4), cited_by_results=citing[w],
                      cited_here=int(here.get(w, 0))) for w in best if w in cards_of]


def printed_entries(con, work_id: str, *, limit: int = 5) -> tuple[int, list[PrintedEntry]]:
    """(how many, the first ``limit``) of the corpus papers' reference-list entries matched to ``work_id``: how the
    papers citing it print it, the most cited citing paper first. None for a work only the citation data names."""
    limit, _ = _limit(limit, 0)
    rows = by_cited.execute(con, """
        SELECT r.paper_id, p.title, r.raw, r.page, l.method, count(*) OVER () AS total
        FROM {reference_links_by_cited} l JOIN paper_references r USING (reference_id)
        LEFT JOIN papers p ON p.paper_id = r.paper_id
        WHERE l.cited_work_id = ? AND r.raw IS NOT NULL
        ORDER BY p.citation_count DESC NULLS LAST, r.paper_id, r.ordinal LIMIT ?""", [work_id, limit]).fetchall()
    return (int(rows[0][5]) if rows else 0), [PrintedEntry(*r[:5]) for r in rows]
