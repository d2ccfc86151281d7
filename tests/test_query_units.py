"""Pure parts of the query module: fusion, signal math, title boosts, stemmer, filters, expansion parsing."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from pipeline.errors import UserError
from pipeline.query import configs, fusion, signals
from pipeline.query.expand import feedback_terms, parse_subqueries, prf_terms, relevance_model
from pipeline.query.filters import Filters, in_clause, mask, sql_literal
from pipeline.query.titles import STEM_EXCEPTIONS, light_stem, names_title, title_boost


# ---- fusion ---------------------------------------------------------------------------------------
def test_blend_weights_normalised_scores():
    ids, fused = fusion.blend(["a", "b"], [10.0, 5.0], ["b", "c"], [0.9, 0.5], w_sparse=0.5)
    # a: bm25 10/10=1 -> 0.5; b: bm25 0.5 -> 0.25 + dense minmax 1 -> 0.5 = 0.75; c: dense minmax 0 -> 0
    assert dict(zip(ids.tolist(), fused.tolist())) == pytest.approx({"b": 0.75, "a": 0.5, "c": 0.0})
    assert ids.tolist() == ["b", "a", "c"]
    ids, fused = fusion.blend(["a", "b"], [10.0, 5.0], ["b", "c"], [0.9, 0.5], w_sparse=1.0)
    assert ids[0] == "a" and dict(zip(ids.tolist(), fused.tolist()))["c"] == 0.0


def test_equal_fused_scores_keep_the_order_first_seen():
    # pool rows as ids: ties (1.0 each) stay in the order the lists met them, BM25 list first
    ids, fused = fusion.blend([7, 3], [2.0, 2.0], [5, 7], [0.5, 0.5], w_sparse=0.5)
    assert ids.tolist() == [7, 3, 5] and fused.tolist() == [1.0, 0.5, 0.5]
    assert fusion.rrf([], [], k=60)[0].size == 0 and fusion.interleave([], [])[0].size == 0


def test_interleave_is_bm25_first_with_dedup_and_cap():
    sparse = [f"s{i}" for i in range(50)] + ["x"]
    dense = ["x", "s0"] + [f"d{i}" for i in range(60)]
    ids, fused = fusion.interleave(sparse[:50], dense, k_merge=100)
    assert ids[:4].tolist() == ["s0", "x", "s1", "s2"]  # s0 from dense is a duplicate and dropped
    assert len(ids) == 100 and len(set(ids.tolist())) == 100
    assert fused[0] == 1.0 and fused[-1] == pytest.approx(1 - 99 / 100)


def test_rrf_matches_formula():
    ids, fused = fusion.rrf(["a", "b"], ["b", "c"], k=60)
    raw = {"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 62}
    assert ids.tolist() == ["b", "a", "c"]
    assert fused[1] == pytest.approx(raw["a"] / raw["b"])


def test_unknown_fusion_is_user_error():
    with pytest.raises(UserError):
        fusion.fuse("nope", [], [], [], [])


# ---- signals ----------------------------------------------------------------------------------------
def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_five_signals_and_seed_score():
    q = _unit([1, 0, 0])[None, :]
    chunks = np.stack([_unit([1, 1, 0]), _unit([0, 1, 0])])
    chunk_paper = np.array([0, 1])
    doc = np.stack([_unit([1, 0, 1]), _unit([0, 0, 1])])
    abs_ = np.stack([_unit([1, 0, 0]), _unit([0, 1, 1])])
    figs = np.stack([_unit([1, 0, 0]), _unit([0, 1, 0]), _unit([-1, 0, 0])])
    fig_paper = np.array([0, 0, 1])  # paper 1 has only an opposite figure: its fig signal is -1
    pr = np.array([0.5, 0.0])
    s = signals.compute_signals(q, chunks, chunk_paper, doc, abs_, pr, figs, fig_paper)
    r = 1 / math.sqrt(2)
    assert s["ck"] == pytest.approx([r, 0.0], abs=1e-6)
    assert s["doc"] == pytest.approx([r, 0.0], abs=1e-6)
    assert s["abs"] == pytest.approx([1.0, 0.0], abs=1e-6)
    assert s["fig"] == pytest.approx([1.0, -1.0], abs=1e-6)
    assert s["pr"] == pytest.approx([math.log(1.5), 0.0])
    total = signals.score(s, configs.weights_for("seed"))
    assert total[0] == pytest.approx(0.5 * r + 0.3 * r + 0.1 * 1 + 0.1 * 1 + 0.2 * math.log(1.5), abs=1e-6)
    assert total[1] == pytest.approx(0.1 * -1.0, abs=1e-6)


def test_paper_without_figures_gets_zero_and_doc_vector_is_renormalised():
    q = _unit([0, 1])[None, :]
    s = signals.compute_signals(q, np.array([[0, 1.0]]), np.array([0]), np.array([[0, 3.0]]), np.array([[0, 0.0]]),
                                np.array([0.0]), None, None)
    assert s["fig"][0] == 0.0 and s["doc"][0] == pytest.approx(1.0) and s["abs"][0] == 0.0


def test_each_signal_keeps_its_max_over_subqueries():
    qs = np.stack([_unit([1, 0]), _unit([0, 1])])
    chunks = np.stack([_unit([1, 0]), _unit([0, 1]), _unit([1, 1])])
    doc = np.stack([_unit([0, 1])])
    s = signals.compute_signals(qs, chunks, np.array([0, 0, 0]), doc, doc, np.array([0.0]),
                                per_query={"bm25": np.array([[1.0, 0.0, 0.2], [0.0, 0.4, 0.3]])})
    # chunk 0 is best for query 1, chunk 1 for query 2: each keeps its own max
    assert s["ck"] == pytest.approx([1.0, 1.0, 1 / math.sqrt(2)], abs=1e-6)
    assert s["doc"] == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)
    assert s["bm25"] == pytest.approx([1.0, 0.4, 0.3])


def test_neighbour_mean_is_the_mean_score_of_the_k_nearest_other_papers():
    vecs = np.stack([_unit([1, 0, 0]), _unit([1, 0.1, 0]), _unit([1, 0.3, 0]), _unit([0, 0, 1]), _unit([1, 0.05, 0])])
    scores = np.array([1.0, 0.5, 0.2, 0.9, 0.7])
    paper = np.array([0, 1, 2, 3, 0])  # passages 0 and 4 belong to the same paper
    nbr = signals.neighbour_mean(vecs, scores, paper, k=2)
    # passage 0: nearest others are 1 and 2 (passage 4, closer, is the same paper): (0.5 + 0.2) / 2
    assert nbr[0] == pytest.approx(0.35)
    assert nbr[1] == pytest.approx((1.0 + 0.7) / 2)  # passages 0 and 4 (other paper for passage 1)
    assert nbr[3] == pytest.approx(np.mean(scores[np.argsort(-(vecs @ vecs[3]))[1:3]]))
    # fewer other-paper passages than k: the mean of those there are; none at all: 0
    assert signals.neighbour_mean(vecs[[0, 4, 1]], scores[[0, 4, 1]], np.array([0, 0, 1]), k=5) == pytest.approx([0.5, 0.5, 0.85])
    assert signals.neighbour_mean(vecs[:2], scores[:2], np.array([7, 7]), k=3) == pytest.approx([0.0, 0.0])
    assert signals.neighbour_mean(vecs[:1], scores[:1], np.array([0]), k=3) == pytest.approx([0.0])


def test_papers_rank_by_best_passage():
    order = signals.best_per_paper(["p1", "p1", "p2", "p3"], np.array([0.1, 0.9, 0.5, 0.7]))
    assert order == [1, 3, 2]


def test_weights_override_and_unknown_signal():
    w = configs.weights_for("default", {"ck": 0.0})
    assert w["ck"] == 0.0 and w["doc"] == 0.3
    assert configs.weights_for("seed") == {"ck": 0.5, "doc": 0.3, "abs": 0.1, "fig": 0.1, "pr": 0.2}
    # the previous default stays available: the default without score regularisation
    assert configs.weights_for("hybrid") == {k: v for k, v in configs.weights_for("default").items() if k != "nbr"}
    assert configs.weights_for("default")["nbr"] > 0
    with pytest.raises(UserError, match="unknown signal"):
        configs.weights_for("default", {"nope": 1.0})
    with pytest.raises(UserError, match="unknown config"):
        configs.weights_for("best")


# ---- title boosts and stemmer -------------------------------------------------------------------------
@pytest.mark.parametrize("word", sorted(STEM_EXCEPTIONS))
def test_stemmer_exceptions_are_kept(word):
    assert light_stem(word) == word
    assert light_stem(word.upper()) == word


@pytest.mark.parametrize("word,stem", [("queries", "query"), ("indexes", "index"), ("papers", "paper"),
                                       ("classes", "class"), ("analysis", "analysis"), ("status", "status"),
                                       ("glass", "glass"), ("retrieval", "retrieval")])
def test_light_stemmer(word, stem):
    assert light_stem(word) == stem


def test_title_boost_points():
    b = title_boost("Information retrieval", "Information Retrieval")
    assert (b.exact, b.stemmed, b.starts, b.words) == (20, 0, 10, 10)
    b = title_boost("information retrievals", "Information Retrieval")
    assert (b.exact, b.stemmed) == (0, 15)
    b = title_boost("the retrieval of books", "Books in libraries")
    assert b.starts == 10 and b.words == 5  # 'books' starts the title; only 'book' is shared
    b = title_boost("cat", "Cat videos")
    assert b.starts == 0  # query words shorter than 4 letters do not count for the start bonus
    b = title_boost("citation index", "A study", excerpt="citation citation index other")
    assert b.excerpt == pytest.approx(10 * 3 / 4)
    assert title_boost("citation", "x", excerpt="citation").excerpt == 10.0  # capped at +10
    assert title_boost("indexing", "Index of periodicals").list_page == -7  # -10 + 3
    assert title_boost("what is indexing", "Index of periodicals").list_page == -2  # -10 + 8
    assert title_boost("indexing", "Periodicals", primary=True).primary == 2
    b = title_boost("this less", "This less")
    assert b.total == b.exact + b.stemmed + b.starts + b.words + b.excerpt + b.list_page + b.primary


# ---- filters --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query, title, share", [
    ("Sequence to Sequence Learning with Neural Networks", "Sequence to sequence learning with neural networks", 1.0),
    ("layer normalization", "Layer normalization", 1.0),
    ("layer normalisations", "Layer Normalization", 0.0),  # another word: not this title
    ("sequence to sequence learning", "Sequence to sequence learning with neural networks", 0.5),  # a phrase of 3
    ("learning with neural networks", "Sequence to sequence learning with neural networks", 0.75),
    ("deep residual learning", "Deep Residual Learning for Image Recognition", 0.6),
    ("neural networks", "Sequence to sequence learning with neural networks", 0.0),  # 2 of 4 words, no long phrase
    ("networks neural learning", "Sequence to sequence learning with neural networks", 0.75),  # 3 of 4 words
    ("attention", "Attention is all you need", 0.0),  # one word names no title
    ("the of and", "The Art of Computer Programming", 0.0),  # stop words only
    ("adam stochastic optimization", "Adam: A method for stochastic optimization", 0.75),
    ("schrodinger equation solutions", "Solutions of the Schrödinger equation", 1.0),  # accents aside
    ("Schrödinger equation solutions", "Solutions of the Schr¨odinger equation", 1.0),  # as a PDF prints it
])
def test_a_query_names_a_title_by_most_of_its_words_or_a_long_phrase(query, title, share):
    assert names_title(query, title) == pytest.approx(share)


def test_only_a_snapshot_with_works_besides_its_papers_is_asked_for_cited_works():
    from pipeline.query.reading import may_cite_outside

    assert not may_cite_outside({"counts": {"papers": 1460, "works": 1460}})  # CISI: each work is a paper
    assert may_cite_outside({"counts": {"papers": 19, "works": 349}})  # 10 PDFs and the works they cite
    assert not may_cite_outside({})  # a manifest without counts


def test_sql_literal_escapes_and_in_clause():
    assert sql_literal("o'reilly") == "'o''reilly'"
    assert sql_literal(2020) == "2020"
    assert in_clause("paper_id", ["a", "b'); DROP TABLE x; --"]) == "paper_id IN ('a', 'b''); DROP TABLE x; --')"
    assert in_clause("paper_id", []) == "false"
    with pytest.raises(UserError):
        sql_literal("a\x00b")
    with pytest.raises(ValueError):
        in_clause("paper_id) OR (1=1", ["a"])


def test_filter_validation():
    with pytest.raises(UserError):
        Filters(year_from="20x0").validated()
    with pytest.raises(UserError):
        Filters(year_from=2021, year_to=2020).validated()
    with pytest.raises(UserError):
        Filters(authors=["x" * 500]).validated()
    assert Filters(categories=[" cs.IR ", ""]).validated().categories == ["cs.IR"]


def test_filter_mask_on_metadata():
    meta = pa.table({
        "paper_id": ["a", "b", "c"], "year": pa.array([2019, 2021, None], pa.int32()),
        "categories": [["cs.IR", "cs.CL"], ["cs.CV"], []], "primary_category": ["cs.IR", "cs.CV", None],
        "authors": [["Gerard Salton"], ["O'Reilly, T.", "Petar Veličković"], ["Jürgen Müller"]],
    })
    ids = lambda f: [p for p, m in zip(meta["paper_id"].to_pylist(), mask(meta, f).to_pylist()) if m]
    assert ids(Filters(year_from=2020)) == ["b"]
    assert ids(Filters(year_to=2020)) == ["a"]
    assert ids(Filters(categories=["CS.cl"])) == ["a"]
    assert ids(Filters(authors=["salton"])) == ["a"]
    assert ids(Filters(authors=["o'reilly"])) == ["b"]
    assert ids(Filters(authors=["%"])) == []  # no pattern syntax: '%' is a literal character
    assert ids(Filters(categories=["' OR 1=1 --"])) == []
    # the name in part, as cited: initials and the surname in either order
    assert ids(Filters(authors=["G. Salton"])) == ids(Filters(authors=["Salton, G."])) == ["a"]
    assert ids(Filters(authors=["Tim O'Reilly"])) == ["b"] and ids(Filters(authors=["H. Salton"])) == []
    # a part of the name with or without its accents
    assert ids(Filters(authors=["muller"])) == ids(Filters(authors=["Müll"])) == ["c"]
    assert ids(Filters(authors=["velickovic"])) == ids(Filters(authors=["Veličk"])) == ["b"]
    assert ids(Filters(authors=["oreilly"])) == ["b"] and ids(Filters(authors=["-"])) == []


# ---- expansion ------------------------------------------------------------------------------------------
def test_parse_subqueries_strips_numbering_and_duplicates():
    content = "1. citation indexing\n2) \"co-citation analysis\"\n- citation indexing\nHere are queries:\nbibliometrics\nextra"
    assert parse_subqueries(content, "citations", 3) == ["citation indexing", "co-citation analysis", "bibliometrics"]


def test_prf_terms_come_from_feedback_not_query():
    passages = [("citation indexes of science journals and citation counts", 1.0),
                ("journals citation impact factor of science", 0.5)]
    model = relevance_model(passages)
    assert model.most_common(1)[0][0] == "citation"
    terms = prf_terms("citations", passages, 3)
    assert "citation" not in terms and "journals" in terms and "science" in terms


def test_feedback_terms_are_weighted_new_and_one_per_stem():
    passages = [("journals journal citation indexes of science journals", 1.0), ("journal impact of science", 1.0)]
    terms = feedback_terms("citations", passages, 5)
    words, probs = [t for t, _ in terms], [p for _, p in terms]
    assert "citation" not in words  # the query's own stem
    assert sum(w.startswith("journal") for w in words) == 1  # one surface form per stem
    assert words[0] == "journal" and probs == sorted(probs, reverse=True) and all(p > 0 for p in probs)
    assert prf_terms("citations", passages, 5) == words
