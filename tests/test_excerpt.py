"""What a result shows of its passage (``pipeline.query.excerpt``): real passages of the recorded PDFs (token windows
that start inside a sentence) and real CISI searches."""

from __future__ import annotations

import re

import pytest

from pipeline.query.excerpt import ELLIPSIS, MIN_SHOWN, excerpt, query_terms

_CACHE: dict = {}


def _chunks(shared_data, settings, paper_id: str) -> list[str]:
    from pipeline.steps.fulltext import extract_pdf

    if paper_id not in _CACHE:
        ex = extract_pdf((shared_data / "arxiv" / "pdf" / f"{paper_id}.pdf").read_bytes(), paper_id, settings)
        _CACHE[paper_id] = [c["text"] for c in ex.chunks if c["role"] == "body"]
    return _CACHE[paper_id]


def _starts_a_sentence(passage: str, shown: str) -> bool:
    """``shown`` (without its ellipsis) is the end of ``passage`` from a sentence's start."""
    rest = shown.removeprefix(ELLIPSIS)
    at = len(passage) - len(rest)
    return passage.endswith(rest) and (at == 0 or bool(re.search(r"[.!?][\"')\]]*\s+$", passage[:at])))


def test_the_excerpt_starts_at_the_sentence_that_matches_the_query(shared_data, settings):
    """ResNet's passage starts inside a sentence ("increasing dimensions (option A). So they ..."); for "residual
    learning degradation problem" the excerpt starts at the sentence naming residual learning."""
    passage = next(c for c in _chunks(shared_data, settings, "1512.03385") if c.startswith("increasing dimensions"))
    shown = excerpt(passage, query_terms(["residual learning degradation problem"]))
    assert shown.startswith(ELLIPSIS + "First, the situation is reversed with residual learning")
    assert _starts_a_sentence(passage, shown)


def test_a_passage_without_the_query_starts_at_its_first_whole_sentence(shared_data, settings):
    inside = [c for c in _chunks(shared_data, settings, "1706.03762") if c[0].islower()]
    assert inside  # token windows after the first of a section start inside a sentence
    for passage in inside:
        shown = excerpt(passage, query_terms(["zebra giraffe savanna"]))
        assert shown.startswith(ELLIPSIS), shown[:60]
        assert _starts_a_sentence(passage, shown) and not re.search(r"\bal\.\s*$", passage[:len(passage) - len(shown) + 2])
        if shown.removeprefix(ELLIPSIS) == passage:  # all of it shown: still marked as starting inside a sentence
            assert shown == ELLIPSIS + passage
    whole = next(c for c in _chunks(shared_data, settings, "1706.03762") if c[0].isupper())
    assert excerpt(whole, query_terms(["zebra giraffe savanna"])) == whole == excerpt(whole, frozenset())


def test_a_match_near_the_end_shows_the_sentences_before_it_too(shared_data, settings):
    for passage in _chunks(shared_data, settings, "1810.04805"):
        last = re.split(r"(?<=[.!?])\s+(?=[A-Z])", passage)[-1]
        terms = query_terms([last])
        if not terms or len(last) >= MIN_SHOWN:
            continue
        shown = excerpt(passage, terms)
        assert _starts_a_sentence(passage, shown) and last in shown
        assert len(shown.removeprefix(ELLIPSIS)) >= MIN_SHOWN or shown.removeprefix(ELLIPSIS) == passage


@pytest.mark.slow
def test_a_passage_shown_whole_that_starts_inside_a_sentence_says_so(shared_data, settings):
    """BERT's appendix passage "the sequence length. To speed up pretraining ..." matched "sequence" in its first
    sentence and was shown as it starts, with nothing to say a sentence began before it."""
    from pipeline.steps.fulltext import extract_pdf

    ex = extract_pdf((shared_data / "arxiv" / "pdf" / "1810.04805.pdf").read_bytes(), "1810.04805", settings)
    passage = next(c["text"] for c in ex.chunks if c["role"] == "appendix" and c["text"].startswith("the sequence length."))
    assert excerpt(passage, query_terms(["sequence to sequence learning"])) == ELLIPSIS + passage
    assert excerpt("Whole sentences only. Nothing cut.", query_terms(["sentences"])) == "Whole sentences only. Nothing cut."


def test_search_results_carry_an_excerpt_of_their_passage(cisi_snapshot):
    from pipeline.query import Searcher, open_snapshot

    s = Searcher(open_snapshot(cisi_snapshot), cisi_snapshot)
    resp = s.search("automatic indexing of document collections", k=10)
    terms = query_terms(resp.queries)
    cut = 0
    for r in resp.results:
        d = r.to_dict()
        assert d["excerpt"] == r.excerpt and d["passage"] == r.passage
        assert _starts_a_sentence(r.passage, r.excerpt)
        cut += r.excerpt != r.passage
        first = re.split(r"(?<=[.!?])\s+", r.excerpt.removeprefix(ELLIPSIS), maxsplit=1)[0]
        if r.excerpt != r.passage and len(r.passage) - len(r.excerpt) + len(ELLIPSIS) > 0:
            assert terms & set(query_terms([first])) or len(r.excerpt) - len(ELLIPSIS) >= MIN_SHOWN
    assert cut  # CISI's abstracts are "title. abstract": a matching sentence further in is shown first
