"""What the reading functions return: small dataclasses (``to_dict()`` for JSON) of papers, their links and lists,
their full text, authors, and the page's examples."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.query.contexts import Context


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
    "timeout": "the PDF took longer to read than the time allowed (PAPERKB_PDF_TIMEOUT_S)",
    "crashed": "the PDF reader stopped on it",
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
