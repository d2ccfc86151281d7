"""Reading the catalog: a paper's links, references and citing papers, lists of papers, author profiles.

Functions over a read-only DuckDB connection to a catalog (a snapshot's ``catalog.duckdb`` or the
warehouse: the same tables), returning small dataclasses (``to_dict()`` for JSON). The page and the
HTTP API (``pipeline.serve``) and the reading commands of the CLI (``show``, ``papers``, ``author``) are
built on them. Every user value is bound as a query parameter.

Ids: a corpus paper id, its unambiguous external id (arXiv id, collection docno), or a citation-graph
work id (an S2 paperId outside the corpus, as references and related papers list them): see
:func:`pipeline.query.records.resolve_ids`.

Where the lists come from:
- references: the paper's own bibliography when its PDF was read (``paper_references``, in printed order,
  each entry with what ``reference_links`` matched it to; an unmatched entry keeps its printed text),
  then the ``citations`` edges from the paper's works that no printed entry gave (Semantic Scholar's,
  a collection's);
- cited by: the ``citations`` edges to the paper's works;
- prior and derivative works (Connected Papers): the works most cited by a set of papers, and the works
  citing most of them.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pipeline.errors import AmbiguousName, UnknownPaper, UserError
from pipeline.query import by_cited
from pipeline.query.author_names import name_parts, names_match, search_word
from pipeline.query.contexts import (MAX_CONTEXTS, Context, Entry, as_context, body_of, cited_at, citing_text,
                                     markers_in, sentences)

MAX_LIMIT = 200
LINK_SORTS = ("order", "citations", "year")
REFERENCE_SORTS = (*LINK_SORTS, "mentions")  # references only: the most cited in the paper's own text first
PAPER_SORTS = ("pagerank", "citations", "date", "title")
LinkSort = Literal["order", "citations", "year"]
PaperSort = Literal["pagerank", "citations", "date", "title"]

ARXIV_ABS = "https://arxiv.org/abs/{}"
ARXIV_PDF = "https://arxiv.org/pdf/{}"
DOI_URL = "https://doi.org/{}"
S2_URL = "https://www.semanticscholar.org/paper/{}"
_WEB_URL = re.compile(r"https?://\S+", re.IGNORECASE)  # the addresses a link may hold (web_url)
_S2_ID = re.compile(r"[0-9a-f]{40}")


# ---- records --------------------------------------------------------------------------------------
@dataclass
class Links:
    """Where to read a paper elsewhere; None where unknown."""

    arxiv: str | None = None  # the arXiv abstract page
    pdf: str | None = None  # the arXiv PDF, else the open-access PDF Semantic Scholar knows
    doi: str | None = None  # https://doi.org/...
    s2: str | None = None  # the Semantic Scholar page


@dataclass(kw_only=True)
class PaperCard:
    """A paper in a list: a corpus paper (``paper_id`` set: it has a page here) or a citation-graph work
    outside the corpus (``work_id`` only)."""

    paper_id: str | None = None
    work_id: str | None = None
    external_id: str | None = None
    title: str | None = None
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    citation_count: int | None = None
    links: Links = field(default_factory=Links)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True)
class Reference(PaperCard):
    """A reference of a paper, or a paper citing it."""

    source: str | None = None  # 's2', 'pdf' or the collection's name: where the edge comes from
    ordinal: int | None = None  # position in the printed bibliography (0-based), for a PDF entry
    page: int | None = None  # PDF page the printed entry starts on
    raw: str | None = None  # the entry as printed (a PDF reference), shown when it matched no known work
    method: str | None = None  # how the printed entry was matched ('arxiv_id', 'doi', 'title', ..., 'unmatched')
    is_influential: bool | None = None  # S2's isInfluential flag
    intents: list[str] = field(default_factory=list)  # S2 citation intents
    # where the citing paper's text cites the work (its first sentences that carry the entry's marker; from its PDF)
    contexts: list[Context] = field(default_factory=list)
    mentions: int | None = None  # how many sentences of the citing paper's text cite it (None: no PDF entry to read)


@dataclass(kw_only=True)
class CountedPaper(PaperCard):
    """A prior or derivative work: how many of the given papers it is cited by (prior) or cites (derivative)."""

    count: int = 0
    in_set: bool = False  # one of the given papers itself


@dataclass(kw_only=True)
class NamedWork(PaperCard):
    """A work outside the corpus whose title a query names, among the works that query's results cite."""

    match: float = 0.0  # the share of the title's content words the query holds (pipeline.query.titles.names_title)
    cited_by_results: int = 0  # how many of the results cite it
    cited_here: int = 0  # how many corpus papers cite it


@dataclass
class ReferencePage:
    total: int
    offset: int
    limit: int
    sort: str
    items: list[Reference]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PaperPage:
    total: int
    offset: int
    limit: int
    sort: str
    items: list[PaperCard]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Section:
    """One section of a paper's full text (the chunks under one heading)."""

    section: str | None
    role: str
    page_start: int | None
    page_end: int | None
    passages: int


@dataclass
class Byline:
    name: str
    affiliation: str | None = None


@dataclass
class FullText:
    """The PDF a paper's passages were read from (``fulltext_docs``)."""

    status: str  # 'ok', or 'rejected' (``reason`` says why; the passages of a version read before stay)
    reason: str | None
    pages: int | None
    arxiv_version: int | None  # the arXiv version of that PDF, when known
    read_at: str | None  # ISO date the extraction last changed
    why: str | None = None  # ``reason`` in words (:func:`rejection_words`)

    def __post_init__(self) -> None:
        if self.why is None and self.status != "ok":
            self.why = rejection_words(self.reason)


# why ``paperkb fulltext`` could not use a PDF (fulltext_docs.reason), in a reader's words; http_<status> apart
_REJECTIONS = {
    "not_pdf": "the download is not a PDF",
    "empty": "the download was empty",
    "truncated": "the PDF is cut short",
    "corrupt": "the PDF is damaged",
    "encrypted": "the PDF is password-protected",
    "no_text": "the PDF has no text to extract (a scan?)",
    "too_large": "the PDF is over the size limit (PAPERKB_PDF_MAX_BYTES)",
    "download_failed": "the download failed",
    "no_pdf_url": "no address of its PDF is known",
}


def rejection_words(reason: str | None) -> str:
    """``fulltext_docs.reason`` as a reader says it: ``http_404`` -> "no PDF at its address (HTTP 404)"."""
    if reason and reason.startswith("http_"):
        code = reason.removeprefix("http_")
        return f"no PDF at its address (HTTP {code})" if code in ("404", "410") else f"its server answered HTTP {code}"
    return _REJECTIONS.get(reason or "", reason or "rejected")


@dataclass
class PaperFacts:
    """What a paper's page shows beside its metadata: links, venue, counts, its sections."""

    paper_id: str
    work_ids: list[str]
    links: Links
    venue: str | None
    published: str | None  # ISO date
    doi: str | None
    categories: list[str]
    primary_category: str | None
    bylines: list[Byline]
    reference_count: int  # the references :func:`references` lists
    cited_by_count: int  # the citing papers :func:`cited_by` lists
    sections: list[Section]
    full_text: FullText | None = None  # None: no PDF read

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NameCount:
    name: str
    count: int


@dataclass
class YearCount:
    year: int
    count: int


@dataclass
class AuthorProfile:
    """An author's papers in the corpus, co-authors and years. Names that differ only in case,
    spacing and punctuation ('Perlis, A. J.', 'Perlis, A.J.') are the same author here; a name that matches none
    of them names the one author whose printed name it matches in part ('Perlis', 'Alan Perlis':
    :mod:`pipeline.query.author_names`)."""

    name: str  # the spelling printed most often
    names: list[str]  # every spelling found
    paper_count: int
    citation_count: int  # sum over the papers
    h_index: int  # over the papers in the corpus
    first_year: int | None
    last_year: int | None
    years: list[YearCount]
    coauthors: list[NameCount]
    papers: list[PaperCard]  # most cited first, at most ``limit``
    asked: str | None = None  # the name asked for, when it named this author in part (a surname, initials)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PriorDerivative:
    """Connected Papers' lists for a set of papers (a paper and its connected papers)."""

    papers: int  # how many papers the set held
    prior: list[CountedPaper]  # most cited by the set: the field's earlier, seminal works
    derivative: list[CountedPaper]  # citing most of the set: surveys and later works

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PrintedEntry:
    """A corpus paper's reference-list entry for a work: the work as that paper prints it."""

    paper_id: str  # the citing corpus paper
    title: str | None  # its title
    raw: str  # the entry as printed
    page: int | None  # the PDF page the entry starts on
    method: str | None  # how the entry was matched to the work ('arxiv_id', 'doi', 'title', ..., 'unmatched')

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Examples:
    """Example queries and id placeholders for the page, taken from the catalog itself."""

    papers: int
    queries: list[str]
    paper_id: str | None
    external_id: str | None
    title: str | None
    author: str | None
    category: str | None
    year_min: int | None
    year_max: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- pure helpers ---------------------------------------------------------------------------------
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


def h_index(citations: list[int]) -> int:
    """The largest h such that h of the papers have at least h citations each."""
    ranked = sorted((c or 0 for c in citations), reverse=True)
    return sum(1 for i, c in enumerate(ranked, start=1) if c >= i)


_STOP = {"a", "an", "and", "the", "of", "on", "in", "for", "to", "with", "by", "at", "from", "as", "its", "is",
         "are", "via", "using", "towards", "toward", "some", "new", "into", "or"}


def example_query(title: str, max_words: int = 6) -> str | None:
    """A short query made from a title: lower case, the part before any colon or bracket, no stopword at
    either end, no digits; None when that part is longer than ``max_words`` words or shorter than two."""
    head = re.split(r"[:;?(\[]| - ", title or "", maxsplit=1)[0]
    words = re.findall(r"[^\W\d_][\w'\-]*", head.lower())
    while words and words[-1] in _STOP:
        words.pop()
    while words and words[0] in _STOP:
        words.pop(0)
    return " ".join(words) if 2 <= len(words) <= max_words else None


def pick_examples(titles: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` example queries from ``titles`` (most central first): each made by :func:`example_query`,
    sharing no content word with one already picked."""
    picked: list[str] = []
    seen: set[str] = set()
    for title in titles:
        q = example_query(title)
        words = set((q or "").split()) - _STOP
        if q and not words & seen:
            picked.append(q)
            seen |= words
        if len(picked) >= n:
            break
    return picked


def _limit(limit: int, offset: int) -> tuple[int, int]:
    if not 1 <= int(limit) <= MAX_LIMIT:
        raise UserError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if int(offset) < 0:
        raise UserError(f"offset must be 0 or more, got {offset}")
    return int(limit), int(offset)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UserError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


# ---- ids ------------------------------------------------------------------------------------------
def resolve(con, paper_id: str) -> tuple[str | None, list[str]]:
    """(corpus paper id or None, the citation-graph work ids of the paper) for any id
    :func:`~pipeline.query.records.resolve_ids` accepts. UnknownPaper when nothing matches."""
    from pipeline.query.records import resolve_ids

    (kind, pid), = resolve_ids(con, [paper_id])
    if kind == "work":
        return None, [pid]
    works = [r[0] for r in con.execute("SELECT work_id FROM works WHERE paper_id = ? ORDER BY work_id", [pid]).fetchall()]
    return pid, list(dict.fromkeys([*works, pid]))


def require_paper(con, paper_id: str) -> str:
    """The corpus paper id of ``paper_id`` (UnknownPaper for an unknown id or a work outside the corpus)."""
    from pipeline.query.records import resolve_ids

    (kind, pid), = resolve_ids(con, [paper_id])  # (not its works: a scan of works by paper id)
    if kind == "work":
        raise UnknownPaper(f"{paper_id!r} is a cited work outside the corpus, not a corpus paper")
    return pid


# ---- cards ----------------------------------------------------------------------------------------
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


# ---- references and citing papers -----------------------------------------------------------------
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


# ---- one paper ------------------------------------------------------------------------------------
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


# ---- lists of papers ------------------------------------------------------------------------------
_PAPER_ORDER = {
    "pagerank": "pagerank DESC NULLS LAST, cites DESC NULLS LAST, paper_id",
    "citations": "cites DESC NULLS LAST, pagerank DESC NULLS LAST, paper_id",
    "date": "published DESC NULLS LAST, year DESC NULLS LAST, paper_id",
    "title": "lower(title) NULLS LAST, paper_id",
}


def list_papers(con, *, sort: str = "pagerank", author: str | None = None, category: str | None = None,
                year_from: int | None = None, year_to: int | None = None, limit: int = 20,
                offset: int = 0) -> PaperPage:
    """Corpus papers, filtered (``author``: a case-insensitive part of an author's name, as the search's
    filter; ``category``: an arXiv category, primary or not; years inclusive) and sorted by
    ``pagerank``, ``citations``, ``date`` (newest first) or ``title``."""
    limit, offset = _limit(limit, offset)
    sort = _choice("sort", sort, PAPER_SORTS)
    if year_from is not None and year_to is not None and year_from > year_to:
        raise UserError(f"year_from {year_from} is after year_to {year_to}")
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if author and author.strip():  # a part of the name, or the name in part ("A. Vaswani" for "Ashish Vaswani")
        # or a part of the name accents and punctuation aside ("muller" for "Jürgen Müller")
        key = con.execute(f"SELECT {_NAME_KEY.format('?')}", [author.strip()]).fetchone()[0]
        where.append(f"paper_id IN (SELECT paper_id FROM paper_authors WHERE contains(lower(name), lower(?)) "
                     f"OR (? <> '' AND contains({_NAME_KEY.format('name')}, ?)) OR name IN (SELECT unnest(?::VARCHAR[])))")
        params += [author.strip(), key, key, _names_in_part(con, author.strip())]
    if category and category.strip():
        # its spellings first (any case), then a plain list match: no lambda (their syntax changed in DuckDB 1.3)
        spelt = [r[0] for r in con.execute("SELECT DISTINCT c FROM (SELECT unnest(categories) AS c FROM papers) "
                                           "WHERE lower(c) = lower(?)", [category.strip()]).fetchall()]
        where.append("(lower(primary_category) = lower(?) OR list_has_any(categories, ?::VARCHAR[]))")
        params += [category.strip(), spelt]
    if year_from is not None:
        where.append("year >= ?")
        params.append(int(year_from))
    if year_to is not None:
        where.append("year <= ?")
        params.append(int(year_to))
    base = f"""
        WITH m AS (SELECT paper_id, max(pagerank) AS pagerank, max(citation_count) AS cites
                   FROM paper_metrics WHERE paper_id IS NOT NULL GROUP BY paper_id),
        listed AS (
            SELECT p.paper_id, p.title, p.year, coalesce(p.published, p.publication_date) AS published, m.pagerank,
                   coalesce(p.citation_count, m.cites) AS cites
            FROM papers p LEFT JOIN m USING (paper_id)
            WHERE {' AND '.join(where)})"""
    total = con.execute(base + "SELECT count(*) FROM listed", params).fetchone()[0]
    ids = [r[0] for r in con.execute(base + f"SELECT paper_id FROM listed ORDER BY {_PAPER_ORDER[sort]} LIMIT ? OFFSET ?",
                                     [*params, limit, offset]).fetchall()]
    found = paper_cards(con, ids)
    return PaperPage(total=int(total), offset=offset, limit=limit, sort=sort, items=[found[i] for i in ids if i in found])


# ---- authors --------------------------------------------------------------------------------------
# a name's key: accents stripped, lower case, letters and digits only ('Perlis, A. J.' = 'Perlis, A.J.')
_NAME_KEY = "regexp_replace(lower(strip_accents({})), '[^a-z0-9]', '', 'g')"


def author_profile(con, name: str, *, limit: int = 50) -> AuthorProfile:
    """The corpus papers of the author named ``name`` (see :class:`AuthorProfile` for how names are
    matched), their co-authors (most shared papers first) and years. UnknownPaper when no paper has
    that author."""
    if not isinstance(name, str) or not name.strip():
        raise UserError("the author name is empty")
    limit, _ = _limit(limit, 0)
    key = con.execute(f"SELECT {_NAME_KEY.format('?')}", [name.strip()]).fetchone()[0]
    by_key = f"SELECT paper_id, name FROM paper_authors WHERE {_NAME_KEY.format('name')} = ?"
    rows = con.execute(by_key, [key]).fetchall()
    asked = None
    if not rows:  # not a name as printed: the one author it names in part, if there is one
        key, asked = _author_named_in_part(con, name.strip()), name.strip()
        rows = con.execute(by_key, [key]).fetchall()
    spellings: dict[str, int] = {}
    for _, n in rows:
        spellings[n] = spellings.get(n, 0) + 1
    names = sorted(spellings, key=lambda n: (-spellings[n], n))
    pids = list(dict.fromkeys(p for p, _ in rows))
    found = paper_cards(con, pids)
    papers = sorted(found.values(), key=lambda c: (-(c.citation_count or 0), -(c.year or 0), c.title or ""))
    years: dict[int, int] = {}
    for c in papers:
        if c.year:
            years[c.year] = years.get(c.year, 0) + 1
    co = con.execute(f"""
        SELECT any_value(name) AS name, count(DISTINCT paper_id) AS n
        FROM paper_authors
        WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND {_NAME_KEY.format('name')} <> ?
        GROUP BY {_NAME_KEY.format('name')} ORDER BY n DESC, name LIMIT 50""", [pids, key]).fetchall()
    return AuthorProfile(
        name=names[0], names=names, paper_count=len(papers), citation_count=sum(c.citation_count or 0 for c in papers),
        h_index=h_index([c.citation_count or 0 for c in papers]), first_year=min(years) if years else None,
        last_year=max(years) if years else None, years=[YearCount(y, n) for y, n in sorted(years.items())],
        coauthors=[NameCount(n, int(k)) for n, k in co], papers=papers[:limit], asked=asked)


def _names_in_part(con, typed: str) -> list[str]:
    """The printed author names that ``typed`` names in part (initials, either order; none for a single word, which
    the substring match covers): :func:`pipeline.query.author_names.names_match` on the names holding its longest
    word."""
    word = search_word(typed)
    if word is None:
        return []
    near = con.execute(f"SELECT DISTINCT name FROM paper_authors WHERE contains({_NAME_KEY.format('name')}, ?)",
                       [word]).fetchall()
    return [n for (n,) in near if names_match(typed, n)]


CANDIDATES_SHOWN = 5  # authors an ambiguous name's message names
CANDIDATES_LISTED = 50  # and its list holds (a common surname names thousands at arXiv's size)


def _author_named_in_part(con, name: str) -> str:
    """The name key of the one author whose printed name ``name`` matches in part (a surname alone, initials, either
    order: :func:`pipeline.query.author_names.names_match`). UnknownPaper when none does, AmbiguousName (the
    candidates, most papers first) when several do."""
    typed = name_parts(name)
    words = sorted({p for p in typed if len(p) > 1})  # one of them is the surname, printed whole
    found: list[tuple[str, str, int]] = []
    if words:  # the printed names holding one of the typed name's words, then each checked part by part
        holds = " OR ".join([f"contains({_NAME_KEY.format('name')}, ?)"] * len(words))
        for key, names, n in con.execute(f"""
                SELECT key, list(name ORDER BY k DESC, name), sum(k) FROM (
                    SELECT {_NAME_KEY.format('name')} AS key, name, count(DISTINCT paper_id) AS k FROM paper_authors
                    WHERE {holds} GROUP BY ALL)
                GROUP BY key""", words).fetchall():
            if any(names_match(name, n) for n in names):
                found.append((key, names[0], int(n)))
    if not found:
        raise UnknownPaper(f"no paper by an author named {name!r}")
    if len(found) > 1:
        found.sort(key=lambda f: (-f[2], f[1]))
        shown = [f"{printed} ({n} paper{'s' if n != 1 else ''})" for _, printed, n in found[:CANDIDATES_SHOWN]]
        more = f" and {len(found) - CANDIDATES_SHOWN} more" if len(found) > CANDIDATES_SHOWN else ""
        raise AmbiguousName(f"{name!r} names {len(found)} authors: {', '.join(shown)}{more}; give the name as printed",
                            [(printed, n) for _, printed, n in found[:CANDIDATES_LISTED]])
    return found[0][0]


# ---- Connected Papers' prior and derivative works -------------------------------------------------
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


# ---- examples -------------------------------------------------------------------------------------
def examples(con, *, n: int = 3) -> Examples:
    """Example queries (short forms of the titles of the most central papers), a paper id, an author, a
    category and the year range of the catalog, for the page's placeholders."""
    papers = con.execute("SELECT count(*) FROM papers").fetchone()[0]
    central = con.execute("""
        WITH m AS (SELECT paper_id, max(pagerank) AS pr FROM paper_metrics WHERE paper_id IS NOT NULL GROUP BY paper_id)
        SELECT p.paper_id, p.external_id, p.title FROM papers p LEFT JOIN m USING (paper_id)
        WHERE p.title IS NOT NULL ORDER BY m.pr DESC NULLS LAST, p.citation_count DESC NULLS LAST, p.paper_id
        LIMIT 200""").fetchall()
    queries = pick_examples([t for _, _, t in central], n)
    top = central[0] if central else (None, None, None)
    author = con.execute("""
        SELECT name FROM paper_authors GROUP BY name ORDER BY count(*) DESC, name LIMIT 1""").fetchone()
    category = con.execute("""
        SELECT primary_category FROM papers WHERE primary_category IS NOT NULL
        GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1""").fetchone()
    lo, hi = con.execute("SELECT min(year), max(year) FROM papers").fetchone()
    return Examples(papers=int(papers), queries=queries, paper_id=top[0], external_id=top[1], title=top[2],
                    author=author[0] if author else None, category=category[0] if category else None,
                    year_min=lo, year_max=hi)
