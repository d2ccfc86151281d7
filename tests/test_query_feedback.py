"""BM25 from the candidates' own text (pipeline.query.bm25) against LanceDB's full-text index, on real CISI.

The rm3 signal and the candidates' exact BM25 no longer come from extra full-text queries: they are computed
from the passages' text with the table's statistics. On a table of up to 20,000 passages every passage is
counted, so the scores must be the index's own; above, a sample estimates the statistics.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipeline.evaluation.qrels import read_queries
from pipeline.query import Searcher, open_snapshot
from pipeline.query.bm25 import Analyzer, CandidateBM25, CollectionStats

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def searcher(cisi_snapshot):
    return Searcher(open_snapshot(cisi_snapshot), cisi_snapshot).warm()


@pytest.fixture(scope="module")
def table(searcher):
    flat = searcher._resident[2]
    return flat.rowids, flat.rows["text"].to_pylist()


def _index_scores(searcher, query, n):
    try:
        t = searcher.fts.query(query, ["_score"], n)
    except Exception:  # a query of stop words only: LanceDB refuses it, nothing matches
        return {}
    return dict(zip(t["_rowid"].to_pylist(), t["_score"].to_pylist()))


def test_the_analyzer_matches_the_index_word_by_word(searcher, table):
    """Stop words (matched after stemming), hyphens, apostrophes, digits, accents, over-long tokens."""
    from lancedb.query import MatchQuery

    rowids, texts = table
    vocab = sorted({w for t in texts[:300] for w in re.findall(r"\S+", t.lower())})
    words = vocab[::max(1, len(vocab) // 120)] + ["others", "would", "will", "having", "because", "co-operation",
                                                  "reader's", "naïve", "1960", "the", "cannot", "x" * 41]
    for w in words:
        want = _index_scores(searcher, MatchQuery(w, "text"), len(rowids))
        got = searcher._cand_bm25.score([(w, 1.0)], rowids, texts)
        assert {int(r) for r, s in zip(rowids, got) if s > 0} == set(want), w
        for r, s in want.items():
            assert got[np.searchsorted(rowids, r)] == pytest.approx(s, rel=1e-5), w


def test_a_boosted_feedback_query_scores_as_the_index_does(searcher, table):
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
        assert got.tolist() == pytest.approx([want.get(int(rowids[i]), 0.0) for i in cand], rel=1e-5)


def test_the_resident_index_answers_every_cisi_query_as_lancedb(searcher, table, shared_data):
    from lancedb.query import MatchQuery

    rowids, _ = table
    index = searcher._resident_index
    assert index is not None
    queries = [" ".join(q.split())[:1000] for q in read_queries(shared_data / "collections" / "cisi" / "CISI.QRY").values()]
    for q in queries[:40]:
        want = _index_scores(searcher, MatchQuery(q, "text"), len(rowids))
        rids, scores = index.search(q)
        got = dict(zip(rids.tolist(), scores.tolist()))
        assert set(got) == set(want)
        assert [got[r] for r in want] == pytest.approx(list(want.values()), rel=1e-5)
        top = lambda d: sorted(d, key=lambda r: (-round(d[r], 4), r))[:50]  # noqa: E731
        assert top(got) == top(want)


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
