"""Cards: a paper or a citation-graph work as a list shows it (title, authors, year, venue, count, links), read for
many ids at once."""

from __future__ import annotations

import re

from pipeline.query import by_cited
from pipeline.query.reading.models import Links, PaperCard


ARXIV_ABS = "https://arxiv.org/abs/{}"
_WEB_URL = re.compile(r"https?://\S+", re.IGNORECASE)
ARXIV_PDF = "https://arxiv.org/pdf/{}"
DOI_URL = "https://doi.org/{}"
S2_URL = "https://www.semanticscholar.org/paper/{}"
_S2_ID = re.compile(r"[0-9a-f]{40}")


def make_links(*, arxiv_id: str | None = None, doi: str | None = None, s2_id: str | None = None,
               pdf_url: str | None = None) -> Links:
    """Links from what is known of a paper: its arXiv id, DOI, S2 paperId, open-access PDF URL."""
    arxiv_id = (arxiv_id or "").strip() or None
    doi = (doi or "").strip() or None
    s2_id = s2_id if s2_id and _S2_ID.fullmatch(s2_id) else None
    pdf = ARXIV_PDF.format(arxiv_id) if arxiv_id else web_url(pdf_url)
    return Links(arxiv=ARXIV_ABS.format(arxiv_id) if arxiv_id else None, pdf=pdf,
                 doi=DOI_URL.format(doi) if doi else None, s2=S2_URL.format(s2_id) if s2_id else None)


def web_url(url: str | None) -> str | None:
    """``url`` when it is an http(s) address (white space around it removed), else None: Semantic Scholar's
    open-access PDF address is data, and a ``javascript:`` or ``data:`` one must never become a link."""
    url = (url or "").strip()
    return url if _WEB_URL.fullmatch(url) else None


# Each part filtered to the ids first (a correlated subquery would aggregate the whole table, then join)
_PAPER_CARDS = """
    WITH ids AS (SELECT DISTINCT unnest(?::VARCHAR[]) AS paper_id),
    w AS (SELECT paper_id, min(doi) AS doi, min(work_id) AS work_id, min(arxiv_id) AS arxiv_id,
                 min(open_access_pdf_url) AS pdf
          FROM works WHERE paper_id IN (SELECT paper_id FROM ids) GROUP BY paper_id),
    m AS (SELECT paper_id, max(citation_count) AS cites FROM paper_metrics
          WHERE paper_id IN (SELECT paper_id FROM ids) GROUP BY paper_id),
    a AS (SELECT paper_id, list(name ORDER BY position) AS names FROM paper_authors
          WHERE paper_id IN (SELECT paper_id FROM ids) GROUP BY paper_id)
    SELECT p.paper_id, p.source, p.external_id, p.title, p.year, coalesce(p.venue, p.journal_ref),
           CAST(coalesce(p.citation_count, m.cites) AS INTEGER), coalesce(p.doi, w.doi),
           coalesce(p.s2_paper_id, w.work_id), w.arxiv_id, coalesce(p.open_access_pdf_url, w.pdf), a.names
    FROM papers p LEFT JOIN w USING (paper_id) LEFT JOIN m USING (paper_id) LEFT JOIN a USING (paper_id)
    WHERE p.paper_id IN (SELECT paper_id FROM ids)"""

_WORK_CARDS = """
    WITH ids AS (SELECT DISTINCT unnest(?::VARCHAR[]) AS work_id),
    a AS (SELECT work_id, list(name ORDER BY position) AS names FROM work_authors
          WHERE work_id IN (SELECT work_id FROM ids) AND name IS NOT NULL GROUP BY work_id),
    m AS (SELECT work_id, citation_count FROM paper_metrics WHERE work_id IN (SELECT work_id FROM ids)),
    -- a work only PDF references name: the authors as one of them prints them
    printed AS (SELECT l.cited_work_id AS work_id, min(r.authors) AS names
                FROM {reference_links_by_cited} l JOIN paper_references r USING (reference_id)
                WHERE l.cited_work_id IN (SELECT work_id FROM ids) AND len(r.authors) > 0 GROUP BY 1)
    SELECT w.work_id, w.title, w.year, w.venue, CAST(coalesce(w.citation_count, m.citation_count) AS INTEGER),
           w.doi, w.arxiv_id, w.open_access_pdf_url, coalesce(a.names, printed.names)
    FROM works w LEFT JOIN a USING (work_id) LEFT JOIN m USING (work_id) LEFT JOIN printed USING (work_id)
    WHERE w.work_id IN (SELECT work_id FROM ids)"""


def paper_cards(con, paper_ids: list[str]) -> dict[str, PaperCard]:
    """paper_id -> card of the corpus papers among ``paper_ids`` (unknown ids are left out)."""
    out: dict[str, PaperCard] = {}
    if not paper_ids:
        return out
    for (pid, source, ext, title, year, venue, cites, doi, s2, w_arxiv, pdf, authors) in con.execute(
            _PAPER_CARDS, [list(dict.fromkeys(paper_ids))]).fetchall():
        arxiv = ext if source == "arxiv" else w_arxiv
        out[pid] = PaperCard(paper_id=pid, work_id=s2, external_id=ext,
                             title=title, authors=list(authors or []), year=year, venue=venue or None,
                             citation_count=cites, links=make_links(arxiv_id=arxiv, doi=doi, s2_id=s2, pdf_url=pdf))
    return out


def work_cards(con, work_ids: list[str]) -> dict[str, PaperCard]:
    """work_id -> card of the works among ``work_ids``; a work that is a corpus paper gets the paper's card."""
    out: dict[str, PaperCard] = {}
    if not work_ids:
        return out
    ids = list(dict.fromkeys(work_ids))
    corpus = dict(con.execute("SELECT work_id, paper_id FROM works WHERE work_id IN (SELECT unnest(?::VARCHAR[])) "
                              "AND paper_id IS NOT NULL", [ids]).fetchall())
    papers = paper_cards(con, list(corpus.values()))
    for wid, pid in corpus.items():
        if pid in papers:
            card = PaperCard(**{**papers[pid].__dict__})
            card.work_id = wid
            out[wid] = card
    rest = [w for w in ids if w not in out]
    for (wid, title, year, venue, cites, doi, arxiv, pdf, authors) in (
            by_cited.execute(con, _WORK_CARDS, [rest]).fetchall() if rest else []):
        out[wid] = PaperCard(work_id=wid, external_id=arxiv or doi, title=title, authors=list(authors or []), year=year,
                             venue=venue or None, citation_count=cites,
                             links=make_links(arxiv_id=arxiv, doi=doi, s2_id=wid, pdf_url=pdf))
    return out


def cards(con, ids: list[str]) -> dict[str, PaperCard]:
    """id -> card for corpus paper ids and work ids alike (what search results and related papers list)."""
    out = paper_cards(con, ids)
    rest = [i for i in ids if i not in out]
    out.update(work_cards(con, rest))
    return out
