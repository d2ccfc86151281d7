"""BM25 from its definition, one passage at a time in plain Python: what paperkb's array code
(pipeline.query.bm25) is checked against, and how LanceDB's index is compared with it.

paperkb's BM25 is ``sum_t w_t * ln(1 + (N - df + 0.5) / (df + 0.5)) * tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``
over the analysed terms of every passage (:class:`pipeline.query.bm25.Analyzer`), k1 = 1.2, b = 0.75. LanceDB's
index, built with :func:`pipeline.query.bm25.index_config`, must find the same passages with the same scores (to
float32): a LanceDB build that analyses text otherwise (another stop-word list, issue 68 item 0) fails here, by
name, rather than as a search that ranks differently.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import pytest

from pipeline.query.bm25 import B, K1, Analyzer


class ReferenceBM25:
    """Every passage of a table, analysed once; BM25 of weighted words for any of them."""

    def __init__(self, rowids: Sequence[int], texts: Sequence[str], analyzer: Analyzer | None = None):
        self.analyzer = analyzer or Analyzer()
        self.docs = {int(r): Counter(self.analyzer.terms(t)) for r, t in zip(rowids, texts)}
        self.lengths = {r: sum(d.values()) for r, d in self.docs.items()}
        self.n = len(self.docs)
        self.avgdl = sum(self.lengths.values()) / self.n
        self.df: Counter[str] = Counter(t for d in self.docs.values() for t in d)

    def score(self, weighted: Sequence[tuple[str, float]], rowid: int) -> float:
        q: dict[str, float] = {}
        for word, w in weighted:
            for t in self.analyzer.terms(word):
                q[t] = q.get(t, 0.0) + w
        doc, dl, total = self.docs[int(rowid)], self.lengths[int(rowid)], 0.0
        for t, w in q.items():
            tf = doc.get(t, 0)
            if tf:
                idf = math.log(1.0 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                total += w * idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / self.avgdl))
        return total

    def matches(self, weighted: Sequence[tuple[str, float]]) -> dict[int, float]:
        """Row id -> BM25 of every passage holding at least one of the words' terms."""
        terms = {t for word, _ in weighted for t in self.analyzer.terms(word)}
        return {r: self.score(weighted, r) for r, d in self.docs.items() if terms & d.keys()}


def agree_with_lancedb(ours: dict[int, float], lancedb: dict[int, float], what: str) -> None:
    """LanceDB's index finds exactly the passages paperkb scores, with the same BM25 (float32)."""
    assert set(ours) == set(lancedb), f"{what}: LanceDB's index matches other passages than the analyzer"
    for k in ours:
        assert ours[k] == pytest.approx(lancedb[k], rel=1e-5), f"{what}: LanceDB's index scores passage {k} otherwise"
