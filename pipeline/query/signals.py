"""The per-passage signals and the score: pure numpy, no I/O.

For queries ``Q`` (the original and its expansions, rows of L2-normalised vectors) and candidate
passages ``N``:

- ``ck``  cosine(query, passage vector)
- ``doc`` cosine(query, the paper's doc vector: mean of its chunk vectors, renormalised here)
- ``abs`` cosine(query, the paper's abstract vector)
- ``fig`` max cosine(query, any figure legend vector of the paper); 0 when it has none
- ``pr``  log(1 + PageRank)
- lexical extras, per query: ``bm25`` (BM25 over the best BM25 score of that query's list, 0 when
  the passage was not a BM25 candidate) and ``fused`` (the fusion score of the candidate lists)
- ``rm3`` (set by the searcher after the first pass): BM25 of the RM3 feedback terms over the
  candidates, over its best; equal to ``bm25`` when no feedback ran

- ``nbr`` (set by the searcher last): score regularisation over the candidates (Diaz, "Regularizing
  ad hoc retrieval scores", CIKM 2005; the cluster hypothesis): the mean score, all other signals
  weighed, of the passage's ``k`` most similar candidate passages of *other* papers (cosine of the
  passage vectors). A passage whose close neighbours also score well gains; an isolated match loses.

Across the queries every signal keeps its maximum per passage; then
``score = sum(weight[s] * signal[s])``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pipeline.vectors import l2_normalise

BASE_SIGNALS = ("ck", "doc", "abs", "fig", "pr")


def per_paper_max(sims: np.ndarray, item_paper: np.ndarray, n_papers: int) -> np.ndarray:
    """``sims`` (Q, F) over items belonging to papers ``item_paper`` (F,) -> (Q, n_papers) max per paper (0 if none)."""
    out = np.zeros((sims.shape[0], n_papers), dtype=np.float32)
    if sims.shape[1]:
        # Cosines can be negative; a paper without figures must stay at 0, one with figures
        # keeps its true maximum, so start from -inf only where figures exist.
        has = np.zeros(n_papers, dtype=bool)
        has[item_paper] = True
        out[:, has] = -np.inf
        for q in range(sims.shape[0]):
            np.maximum.at(out[q], item_paper, sims[q])
    return out


def compute_signals(
    qv: np.ndarray,
    chunk_vecs: np.ndarray,
    chunk_paper: np.ndarray,
    doc_vecs: np.ndarray,
    abs_vecs: np.ndarray,
    pagerank: np.ndarray,
    fig_vecs: np.ndarray | None = None,
    fig_paper: np.ndarray | None = None,
    per_query: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """All signals for N passages, each the max over the Q queries (shape (N,)).

    ``chunk_paper`` (N,) indexes rows of the paper arrays (P, d); ``fig_paper`` (F,) too.
    ``per_query`` holds extra (Q, N) signals already computed per query (``bm25``, ``fused``).
    """
    qv = l2_normalise(qv)
    chunk_paper = np.asarray(chunk_paper, dtype=np.int64)
    n_papers = doc_vecs.shape[0]
    out: dict[str, np.ndarray] = {}
    out["ck"] = (qv @ l2_normalise(chunk_vecs).T).max(axis=0)
    out["doc"] = (qv @ l2_normalise(doc_vecs).T).max(axis=0)[chunk_paper]
    out["abs"] = (qv @ l2_normalise(abs_vecs).T).max(axis=0)[chunk_paper]
    if fig_vecs is not None and len(fig_vecs):
        fig = per_paper_max(qv @ l2_normalise(fig_vecs).T, np.asarray(fig_paper, dtype=np.int64), n_papers)
        out["fig"] = fig.max(axis=0)[chunk_paper]
    else:
        out["fig"] = np.zeros(len(chunk_paper), dtype=np.float32)
    out["pr"] = np.log1p(np.asarray(pagerank, dtype=np.float64))[chunk_paper]
    for name, m in (per_query or {}).items():
        out[name] = np.asarray(m, dtype=np.float64).reshape(-1, len(chunk_paper)).max(axis=0)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def score(signals: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Weighted sum of the signals named in ``weights`` (a missing signal counts as 0)."""
    n = len(next(iter(signals.values()))) if signals else 0
    total = np.zeros(n, dtype=np.float64)
    for name, w in weights.items():
        if w and name in signals:
            total += w * signals[name]
    return total


def neighbour_mean(vecs: np.ndarray, scores: np.ndarray, paper: np.ndarray, k: int) -> np.ndarray:
    """Per passage: mean of ``scores`` over its ``k`` nearest passages (cosine of ``vecs``) of other papers.

    Score regularisation (Diaz 2005): ``score + w * nbr`` ranks as ``(1 - a) * score + a * nbr`` with
    ``a = w / (1 + w)``. Passages of the same paper are not each other's neighbours (a paper must not
    vouch for itself); with fewer than ``k`` such passages the mean is over those there are (0 if none).
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = len(scores)
    if n < 2 or k < 1:
        return np.zeros(n, dtype=np.float64)
    x = l2_normalise(vecs)
    sim = x @ x.T
    paper = np.asarray(paper)
    sim[paper[:, None] == paper[None, :]] = -np.inf  # self and same-paper passages
    kk = min(k, n - 1)
    nn = np.argpartition(-sim, kk - 1, axis=1)[:, :kk]
    ok = np.isfinite(np.take_along_axis(sim, nn, axis=1))
    total = np.where(ok, scores[nn], 0.0).sum(axis=1)
    cnt = ok.sum(axis=1)
    return np.divide(total, cnt, out=np.zeros(n, dtype=np.float64), where=cnt > 0)


def best_per_paper(paper_ids: list[str], scores: np.ndarray) -> list[int]:
    """Indexes of each paper's best passage (the first of equals), ordered by that score, then by paper
    id (papers rank by their best passage)."""
    if not len(paper_ids):
        return []
    scores = np.asarray(scores)
    _, code = np.unique(np.asarray(paper_ids), return_inverse=True)  # codes in paper-id order
    by_paper = np.lexsort((np.arange(len(scores)), -scores, code))  # per paper: best first, first of equals
    head = by_paper[np.r_[True, code[by_paper][1:] != code[by_paper][:-1]]]
    return head[np.lexsort((code[head], -scores[head]))].tolist()
