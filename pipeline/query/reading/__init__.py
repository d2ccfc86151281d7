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

Layout::

    models.py     the dataclasses returned (``PaperCard``, ``Reference``, ``PaperFacts``, ``AuthorProfile``, ...)
    args.py       ids resolved, limits and sorts checked
    cards.py      cards of papers and works, and their links elsewhere (arXiv, DOI, Semantic Scholar)
    links.py      references and citing papers (with the sentences that cite), prior and derivative works
    paper.py      one paper's facts, sections and full text
    papers.py     lists of papers, author profiles
    citations.py  in-text citations of passages, cited works a query names, printed entries of a work
    examples.py   example queries and placeholders for the page
"""

from pipeline.query.reading.args import (LINK_SORTS, LinkSort, MAX_LIMIT, PAPER_SORTS, PaperSort, REFERENCE_SORTS,
                                         require_paper, resolve)
from pipeline.query.reading.cards import (ARXIV_ABS, ARXIV_PDF, DOI_URL, S2_URL, cards, make_links, paper_cards,
                                          work_cards)
from pipeline.query.reading.citations import (cited_titles, cited_works_named, may_cite_outside, passage_citations,
                                              printed_entries)
from pipeline.query.reading.examples import example_query, examples, pick_examples
from pipeline.query.reading.links import _REFERENCES, _listing, cited_by, link_counts, prior_and_derivative, references
from pipeline.query.reading.models import (AuthorProfile, Byline, CountedPaper, Examples, FullText, Links, NameCount,
                                           NamedWork, PaperCard, PaperFacts, PaperPage, PrintedEntry, PriorDerivative,
                                           Reference, ReferencePage, Section, YearCount, rejection_words)
from pipeline.query.reading.paper import full_text, paper_facts, sections
from pipeline.query.reading.papers import CANDIDATES_LISTED, CANDIDATES_SHOWN, author_profile, h_index, list_papers

__all__ = ["ARXIV_ABS", "ARXIV_PDF", "AuthorProfile", "Byline", "CANDIDATES_LISTED", "CANDIDATES_SHOWN",
           "CountedPaper", "DOI_URL", "Examples", "FullText", "LINK_SORTS", "LinkSort", "Links", "MAX_LIMIT",
           "NameCount", "NamedWork", "PAPER_SORTS", "PaperCard", "PaperFacts", "PaperPage", "PaperSort",
           "PrintedEntry", "PriorDerivative", "REFERENCE_SORTS", "Reference", "ReferencePage", "S2_URL", "Section",
           "YearCount", "_REFERENCES", "_listing", "author_profile", "cards", "cited_by", "cited_titles",
           "cited_works_named", "example_query", "examples", "full_text", "h_index", "link_counts", "list_papers",
           "make_links", "may_cite_outside", "paper_cards", "paper_facts", "passage_citations", "pick_examples",
           "printed_entries", "prior_and_derivative", "references", "rejection_words", "require_paper", "resolve",
           "sections", "work_cards"]
