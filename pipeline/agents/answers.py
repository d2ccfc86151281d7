"""The MCP tools' answers: pydantic models whose JSON schemas are the tools' output schemas.

Each answer names the snapshot it was read from (``snapshot_id``). They mirror the dictionaries the
query layer's records give (``to_dict()``), which are validated into them (keys they do not list are
dropped), so the HTTP API, the CLI's ``--json`` and the MCP tools say the same thing in the same words.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SNAPSHOT = Field(description="the published snapshot the answer was read from")


class Links(BaseModel):
    arxiv: str | None = Field(None, description="the arXiv abstract page")
    pdf: str | None = Field(None, description="the arXiv PDF, else the open-access PDF Semantic Scholar knows")
    doi: str | None = Field(None, description="https://doi.org/...")
    s2: str | None = Field(None, description="the Semantic Scholar page")


class SearchHit(BaseModel):
    rank: int
    paper_id: str = Field(description="the paper's id in the snapshot (give it to get_paper, get_passages, ...)")
    external_id: str | None = Field(None, description="arXiv id or collection docno")
    title: str | None
    authors: list[str]
    year: int | None
    score: float = Field(description="the ranking score (a weighted sum of the signals)")
    signals: dict[str, float] = Field(description="the signals of the score: ck (best passage cosine), doc, abs, fig, "
                                                  "pr (PageRank), bm25, fused, rm3, nbr, ...")
    passage: str = Field(description="the paper's best passage for the query")
    chunk_id: str | None = Field(None, description="the passage's id: '<paper_id>#<ordinal>', '<paper_id>#abs' for the abstract")
    page: int | None = Field(None, description="PDF page the passage starts on (none for the abstract)")
    section: str | None = Field(None, description="section heading of the passage ('abstract' for the abstract)")
    role: str | None = Field(None, description="body, appendix, acknowledgements or abstract")
    query: str | None = Field(None, description="the (sub-)query that matched the passage best")
    citation_count: int | None = None
    venue: str | None = None
    links: Links | None = Field(None, description="where to read it elsewhere")
    index: str | None = Field(None, description="several indexes searched as one: the index this paper is from "
                                                "(the other tools read the first index)")
    also_in: list[str] | None = Field(None, description="several indexes: the other indexes holding the same paper")


class Index(BaseModel):
    index: str = Field(description="the index's name")
    snapshot_id: str = Field(description="the snapshot it searched")
    results: int | None = None
    took_ms: float | None = None


class WorkCard(BaseModel):
    """What a list shows of a work (a corpus paper or not)."""

    title: str | None
    authors: list[str]
    year: int | None
    citation_count: int | None = None
    links: Links


class NamedWork(WorkCard):
    work_id: str = Field(description="its citation-graph work id (get_work reads it)")
    match: float = Field(description="the share of its title's content words the query holds")
    cited_by_results: int = Field(description="how many of the results cite it")
    cited_here: int = Field(description="how many of the snapshot's papers cite it")


class SearchAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    query: str
    queries: list[str] = Field(description="the queries run: the query and its expansions")
    notes: list[str] = Field(description="what the search did beside ranking (expansion terms, fallbacks)")
    results: list[SearchHit]
    cited_works: list[NamedWork] = Field(default_factory=list, description=(
        "works outside the snapshot's papers whose title the query names, among those the results cite (a search "
        "for a cited work's title): get_work tells who cites it and how"))
    indexes: list[Index] | None = Field(None, description="several indexes searched as one (PAPERKB_SERVE_SNAPSHOTS): "
                                                          "each one's name and snapshot id")


class Figure(BaseModel):
    label: str | None = None
    number: int | None = None
    page: int | None = None
    text: str = Field(description="the figure's legend")


class Metrics(BaseModel):
    citation_count: int | None = None
    pagerank: float | None = None
    weight: float | None = Field(None, description="the paper's citation weight in the co-citation graph")


class Author(BaseModel):
    name: str
    affiliation: str | None = None


class Section(BaseModel):
    section: str | None = Field(description="the heading ('3.2 Attention'); give it to get_passages")
    role: str = Field(description="body, acknowledgements, appendix, or references (the bibliography: not a passage; "
                                  "get_citations lists it)")
    page_start: int | None
    page_end: int | None
    passages: int = Field(description="chunks under the heading")


class FullText(BaseModel):
    status: str = Field(description="'ok', or 'rejected' (reason says why; the passages of a version read before stay)")
    reason: str | None = None
    pages: int | None = None
    arxiv_version: int | None = Field(None, description="the arXiv version of the PDF read, when known")
    read_at: str | None = Field(None, description="ISO date its text last changed")
    why: str | None = Field(None, description="the reason in words, for a PDF not used")


class PaperAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    paper_id: str
    external_id: str | None = None
    work_ids: list[str] = Field(default_factory=list, description="its citation-graph work ids")
    source: str | None = Field(None, description="'arxiv' or the collection it was imported from")
    title: str | None = None
    authors: list[Author] = Field(default_factory=list)
    year: int | None = None
    published: str | None = Field(None, description="publication date, ISO")
    doi: str | None = None
    venue: str | None = Field(None, description="journal reference or venue")
    categories: list[str] = Field(default_factory=list)
    primary_category: str | None = None
    links: Links = Field(description="where to read it elsewhere")
    abstract: str | None = None
    passages: int | None = Field(None, description="how many passages get_passages has for it")
    sections: list[Section] = Field(default_factory=list, description="its full text's sections in reading order, "
                                                                       "with their pages (none without a PDF)")
    reference_count: int = Field(description="the papers it cites that get_citations lists")
    cited_by_count: int = Field(description="the papers citing it that get_citations lists")
    figures: list[Figure] = Field(default_factory=list)
    metrics: Metrics
    full_text: FullText | None = Field(None, description="the PDF its passages were read from (none without one)")


class Passage(BaseModel):
    chunk_id: str
    ordinal: int = Field(description="reading order within the paper; -1 for the abstract")
    kind: Literal["body", "abstract"]
    section: str | None
    role: str = Field(description="body, acknowledgements, appendix or abstract")
    page_start: int | None
    page_end: int | None
    text: str


class PassagesAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    paper_id: str
    title: str | None
    total: int = Field(description="passages matching the selection; page through them with offset")
    offset: int
    limit: int
    passages: list[Passage]


class CitationContext(BaseModel):
    text: str = Field(description="a sentence of the citing paper's text that cites the work")
    page: int | None = Field(None, description="its PDF page")
    section: str | None = Field(None, description="its section heading")
    marker: list[int] | None = Field(None, description="[start, end) of the in-text citation in text")


class CitedPaper(BaseModel):
    paper_id: str | None = Field(description="the paper's id when it is in the snapshot, else none")
    work_id: str | None = Field(description="its citation-graph work id")
    external_id: str | None = None
    title: str | None
    authors: list[str]
    year: int | None
    venue: str | None = None
    citation_count: int | None = None
    links: Links
    source: str | None = Field(None, description="where the link comes from: 'pdf' (the printed bibliography), 's2', "
                                                 "or the collection")
    ordinal: int | None = Field(None, description="position in the printed bibliography (0-based)")
    page: int | None = Field(None, description="PDF page the printed entry is on")
    raw: str | None = Field(None, description="the entry as printed, when it matched no known work")
    is_influential: bool | None = None
    intents: list[str] = Field(default_factory=list, description="Semantic Scholar's citation intents")
    contexts: list[CitationContext] = Field(default_factory=list, description="where the citing paper's text cites "
                                                                               "the work (from its PDF; at most 3)")
    mentions: int | None = Field(None, description="how many sentences of the citing paper's text cite the work (none "
                                                   "without its PDF's entry)")


class CitationsAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    paper_id: str
    direction: Literal["references", "cited_by"]
    total: int = Field(description="papers in the list; page through them with offset")
    offset: int
    limit: int
    sort: str
    items: list[CitedPaper]


class PrintedEntry(BaseModel):
    paper_id: str = Field(description="the corpus paper whose reference list prints it")
    title: str | None = Field(None, description="that paper's title")
    raw: str = Field(description="the entry as printed")
    page: int | None = Field(None, description="PDF page the entry is on")
    method: str | None = Field(None, description="how the entry was matched to the work: 'arxiv_id', 'doi', 'title', "
                                                 "..., 'unmatched' (a work of its own)")


class CitedWith(WorkCard):
    paper_id: str | None = Field(description="the paper's id when it is in the snapshot, else none")
    work_id: str | None = Field(description="its citation-graph work id")
    count: int = Field(description="how many of the papers citing the work cite this one too")


class WorkAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    work_id: str = Field(description="the work's id in the citation graph (get_citations takes it)")
    external_id: str | None = Field(None, description="its arXiv id or DOI, when known")
    title: str | None
    authors: list[str]
    year: int | None
    venue: str | None = None
    citation_count: int | None = Field(None, description="Semantic Scholar's count when it knows the work, else the "
                                                         "papers citing it here")
    links: Links
    reference_count: int = Field(description="the works it cites that get_citations lists (known from Semantic Scholar)")
    cited_by_count: int = Field(description="the papers citing it that get_citations lists")
    printed_total: int = Field(description="the corpus papers' reference-list entries matched to it")
    printed: list[PrintedEntry] = Field(description="those entries, the most cited citing paper's first")
    citing: int = Field(description="the papers citing it, among whom cited_with is counted")
    cited_with: list[CitedWith] = Field(description="the works cited together with it by the most of its citing papers "
                                                    "(at least two)")


class RelatedPaper(BaseModel):
    rank: int
    paper_id: str | None = Field(description="the paper's id when it is in the snapshot, else none")
    work_id: str | None = Field(description="its citation-graph work id (export and citation_path take it too)")
    external_id: str | None = None
    title: str | None
    year: int | None
    citation_count: int | None
    score: float
    ccbc_weighted: float = Field(description="weighted co-citation / bibliographic coupling with the paper")
    semantic: float = Field(description="cosine between the papers' vectors")
    quality: float
    components: dict[str, float]


class RelatedAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    paper_id: str
    title: str | None
    related: list[RelatedPaper]


class Recommendation(BaseModel):
    rank: int
    paper_id: str
    external_id: str | None = None
    title: str | None
    year: int | None
    score: float
    semantic: float
    graph: float
    why: str = Field(description="the nearest seed and the citation evidence, in one line")


class RecommendAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    positives: list[str]
    negatives: list[str]
    results: list[Recommendation]


class Hop(BaseModel):
    work_id: str
    paper_id: str | None
    title: str | None
    year: int | None
    link: Literal["cites", "cited_by"] | None = Field(
        description="how this hop is linked to the previous one: 'cites' (the previous cites this) or 'cited_by'")


class PathAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    source: str
    target: str
    max_length: int
    length: int | None = Field(description="hops of the shortest paths; none when none within max_length")
    count: int
    truncated: bool = Field(description="more shortest paths exist than were listed")
    paths: list[list[Hop]]


class ExportAnswer(BaseModel):
    snapshot_id: str = SNAPSHOT
    format: Literal["bibtex", "ris", "csl-json"]
    count: int = Field(description="papers exported")
    text: str = Field(description="the papers as one BibTeX, RIS or CSL-JSON document")


class EvidencePassage(BaseModel):
    n: int = Field(description="the number claims cite: [n]")
    paper_id: str
    external_id: str | None = None
    title: str | None
    authors: list[str]
    year: int | None
    page: int | None = Field(None, description="PDF page the passage starts on (none for the abstract)")
    section: str | None
    role: str | None
    chunk_id: str | None
    text: str = Field(description="the passage")
    index: str | None = None


class Claim(BaseModel):
    text: str = Field(description="one sentence of the answer, with its [n] citations")
    cites: list[int] = Field(description="the evidence numbers it cites (every one is in the evidence list)")


class AskAnswer(BaseModel):
    snapshot_id: str | None = SNAPSHOT
    question: str
    evidence: list[EvidencePassage] = Field(description="numbered passages: the best passage of each top paper")
    claims: list[Claim] = Field(description="the LLM's answer, sentence by sentence, each citing the evidence; empty "
                                            "without an LLM (the evidence alone)")
    dropped: list[str] = Field(description="sentences of the LLM's answer that cited no listed passage")
    model: str | None = Field(None, description="the LLM that wrote the claims")
    notes: list[str]
    search_notes: list[str]
