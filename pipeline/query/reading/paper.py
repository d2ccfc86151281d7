"""One paper's page beside its metadata: links, venue, bylines, counts, its sections and the PDF they were read
from."""

from __future__ import annotations

from pipeline.query.reading.args import require_paper
from pipeline.query.reading.cards import DOI_URL, paper_cards
from pipeline.query.reading.links import link_counts
from pipeline.query.reading.models import Byline, FullText, PaperFacts, Section


def sections(con, paper_id: str) -> list[Section]:
    """The sections of a paper's full text in reading order, with their pages (empty without a PDF)."""
    rows = con.execute("""
        SELECT section, coalesce(role, 'body'), min(page_start), max(page_end), count(*), min(ordinal) AS first
        FROM chunks WHERE paper_id = ? AND coalesce(role, 'body') <> 'front'
        GROUP BY section, coalesce(role, 'body') ORDER BY first""", [paper_id]).fetchall()
    return [Section(section=s, role=r, page_start=a, page_end=b, passages=int(n)) for s, r, a, b, n, _ in rows]


def paper_facts(con, paper_id: str) -> PaperFacts:
    """Links, venue, categories, bylines, reference and cited-by counts and sections of a corpus paper."""
    pid = require_paper(con, paper_id)
    card = paper_cards(con, [pid])[pid]
    (published, doi, cats, primary), = con.execute(
        "SELECT CAST(coalesce(published, publication_date) AS VARCHAR), doi, categories, primary_category "
        "FROM papers WHERE paper_id = ?", [pid]).fetchall()
    bylines = [Byline(n, a) for n, a in con.execute(
        "SELECT name, affiliation FROM paper_authors WHERE paper_id = ? ORDER BY position", [pid]).fetchall()]
    works = [r[0] for r in con.execute("SELECT work_id FROM works WHERE paper_id = ? ORDER BY work_id", [pid]).fetchall()]
    n_refs, n_cites = link_counts(con, pid, list(dict.fromkeys([*works, pid])))  # (resolve's works, read once)
    doi = doi or (card.links.doi or "").removeprefix(DOI_URL.format("")) or None
    return PaperFacts(paper_id=pid, work_ids=works,
                      links=card.links, venue=card.venue, published=published, doi=doi, categories=list(cats or []),
                      primary_category=primary, bylines=bylines, reference_count=n_refs, cited_by_count=n_cites,
                      sections=sections(con, pid), full_text=full_text(con, pid))


def full_text(con, paper_id: str) -> FullText | None:
    """The PDF ``paper_id``'s passages come from (None when none was read; a catalog published before
    ``fulltext_docs.pdf_version`` existed gives no version)."""
    cols = {r[0] for r in con.execute("SELECT column_name FROM (DESCRIBE fulltext_docs)").fetchall()}
    version = "pdf_version" if "pdf_version" in cols else "NULL"
    rows = con.execute(f"SELECT status, reason, n_pages, {version}, CAST(CAST(extracted_at AS DATE) AS VARCHAR) "
                       "FROM fulltext_docs WHERE paper_id = ?", [paper_id]).fetchall()
    return FullText(*rows[0]) if rows else None
