"""BM25 from the candidates' own text (pipeline.query.bm25) on real CISI: against BM25 from its definition
(tests/bm25_reference.py), and against LanceDB's full-text index.

The rm3 signal and the candidates' exact BM25 no longer come from extra full-text queries: they are computed
from the passages' text with the table's statistics. On a table of up to 20,000 passages every passage is
counted, so the scores are BM25's exactly (the reference's); above, a sample estimates the statistics. LanceDB's
index must find the same passages and rank them alike; its ``_score`` is not the same number on every CPU, so no
test asks for it to the last digit (issue 68, item 0).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipeline.evaluation.qrels import read_queries
from pipeline.query import Searcher, open_snapshot
from pipeline.query.bm25 import Analyzer, CandidateBM25, CollectionStats
from bm25_reference import ReferenceBM25, agree_with_lancedb

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def searcher(cisi_snapshot):
    return Searcher(open_snapshot(cisi_snapshot), cisi_snapshot).warm()


@pytest.fixture(scope="module")
def table(searcher):
    flat = searcher._resident[2]
    return flat.rowids, flat.rows["text"].to_pylist()


@pytest.fixture(scope="module")
def reference(table):
    rowids, texts = table
    return ReferenceBM25(rowids, texts)


def _index_scores(searcher, query, n):
    try:
        t = searcher.fts.query(query, ["_score"], n)
    except Exception:  # a query of stop words only: LanceDB refuses it, nothing matches
        return {}
    return dict(zip(t["_rowid"].to_pylist(), t["_score"].to_pylist()))


def test_the_analyzer_matches_the_index_word_by_word(searcher, table, reference):
    """Stop words (matched after stemming), hyphens, apostrophes, digits, accents, over-long tokens: the index finds
    exactly the passages the analyzer does, and the scores are BM25's."""
    from lancedb.query import MatchQuery

    rowids, texts = table
    vocab = sorted({w for t in texts[:300] for w in re.findall(r"\S+", t.lower())})
    words = vocab[::max(1, len(vocab) // 120)] + ["others", "would", "will", "having", "because", "co-operation",
                                                  "reader's", "naïve", "1960", "the", "cannot", "x" * 41, "substantial"]
    for w in words:
        got = searcher._cand_bm25.score([(w, 1.0)], rowids, texts)
        ours = {int(r): float(s) for r, s in zip(rowids, got) if s > 0}
        assert ours == pytest.approx(reference.matches([(w, 1.0)]), rel=1e-9), w
        agree_with_lancedb(ours, _index_scores(searcher, MatchQuery(w, "text"), len(rowids)), w)


def test_a_boosted_feedback_query_scores_as_the_index_does(searcher, table, reference):
    """What rm3 asks: a boolean OR of ~30 terms, each boosted by its P(w|R) over the best."""
    from lancedb.query import BooleanQuery, MatchQuery, Occur

    from pipeline.query.expand import feedback_terms

    rowids, texts = table
    rng = np.random.default_rng(3)
    for _ in range(5):
        fb = [(texts[i], 1.0) for i in rng.choice(len(texts), 3, replace=False)]
        terms = feedback_terms("information retrieval", fb, 30)
        best = max(p for _, p in terms)
        weighted = [(t, p / best) for t, p in terms]
        want = _index_scores(searcher, BooleanQuery([(Occur.SHOULD, MatchQuery(t, "text", boost=w)) for t, w in weighted]),
                             len(rowids))
        cand = rng.choice(len(rowids), 150, replace=False)  # a candidate set
        got = searcher._cand_bm25.score(weighted, rowids[cand], [texts[i] for i in cand])
        assert got.tolist() == pytest.approx([reference.score(weighted, rowids[i]) for i in cand], rel=1e-9)
        ours = {int(rowids[i]): float(s) for i, s in zip(cand, got) if s > 0}
        agree_with_lancedb(ours, {r: want[r] for r in (int(rowids[i]) for i in cand) if r in want}, "rm3 terms")


def test_the_resident_index_answers_every_cisi_query_as_bm25(searcher, table, reference, shared_data):
    """Every match, with BM25's score (float32, as an index returns it); LanceDB finds the same passages."""
    from lancedb.query import MatchQuery

    rowids, _ = table
    index = searcher._resident_index
    assert index is not None
    queries = [" ".join(q.split())[:1000] for q in read_queries(shared_data / "collections" / "cisi" / "CISI.QRY").values()]
    for q in queries[:40]:
        want = {r: float(np.float32(s)) for r, s in reference.matches([(q, 1.0)]).items()}  # as an index returns it
        rids, scores = index.search(q)
        got = dict(zip(rids.tolist(), scores.tolist()))
        assert set(got) == set(want)
        assert [got[r] for r in want] == pytest.approx(list(want.values()), rel=1e-6)
        top = lambda d: sorted(d, key=lambda rid: (-round(d[rid], 4), rid))[:50]  # noqa: E731
        assert top(got) == top(want)
        agree_with_lancedb(got, _index_scores(searcher, MatchQuery(q, "text"), len(rowids)), q[:40])


def test_sampled_statistics_estimate_the_scores(table):
    """Above the sample size the statistics come from a sample: rankings of candidates barely move."""
    rowids, texts = table
    analyzer = Analyzer()
    exact = CandidateBM25(analyzer, CollectionStats.count(analyzer, texts))
    rng = np.random.default_rng(0)
    sample = [texts[i] for i in rng.choice(len(texts), len(texts) // 3, replace=False)]
    sampled = CandidateBM25(analyzer, CollectionStats.count(analyzer, sample, n_docs=len(texts)))
    assert sampled.stats.n_docs == len(texts) and sampled.stats.sampled == len(sample)
    cand = rng.choice(len(texts), 150, replace=False)
    for q in ("information retrieval systems", "citation analysis of journals", "library classification schemes"):
        a = exact.score([(q, 1.0)], rowids[cand], [texts[i] for i in cand])
        b = sampled.score([(q, 1.0)], rowids[cand], [texts[i] for i in cand])
        assert np.corrcoef(a, b)[0, 1] > 0.95
        assert ((a > 0) == (b > 0)).all()  # the same passages match
