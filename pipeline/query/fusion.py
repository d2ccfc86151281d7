"""Candidate fusion: how the BM25 list and the vector list become one candidate list.

Pure functions over ranked id arrays (pool rows in a search; any ids that sort) and their raw
scores, vectorised with numpy. Each method returns ``(ids, fused)``: the merged candidate ids in
order and, aligned with them, a fused score in [0, 1] (shown as the ``fused`` signal); equal scores
keep the order the ids were first seen in (BM25 list first). Methods:

- ``blend``: weighted blend of the normalised scores (default 0.5 BM25 / 0.5 dense).
  BM25 is divided by the list's best score; dense cosine is min-max normalised over the
  list. A candidate missing from one list gets 0 there.
- ``interleave``: BM25 first, then alternate with the dense list, dropping duplicates,
  until ``k_merge`` ids (the classic K_SPARSE=50 / K_DENSE=50 / K_MERGE=100 recipe). Fused
  score = 1 - position / k_merge.
- ``rrf``: reciprocal rank fusion, sum of 1 / (k + rank), divided by its maximum.
"""

from __future__ import annotations

import numpy as np

FUSIONS = ("blend", "interleave", "rrf")


def normalise_max(scores: np.ndarray) -> np.ndarray:
    """Scores divided by their maximum (BM25: 0 keeps meaning 'not matched')."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    top = scores.max()
    return scores / top if top > 0 else np.zeros_like(scores)


def normalise_minmax(scores: np.ndarray) -> np.ndarray:
    """Min-max to [0, 1]; a constant list maps to 1."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    lo, hi = scores.min(), scores.max()
    if hi - lo <= 1e-12:
        return np.ones_like(scores)
    return (scores - lo) / (hi - lo)


def _keys(ids) -> np.ndarray:
    a = np.asarray(ids)
    return a if a.size else np.zeros(0, dtype=np.int64)


def _ranked(keys: np.ndarray, contrib: np.ndarray, k_merge: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``keys`` by the sum of their ``contrib`` (added in input order), best first; equal sums
    keep the order the keys were first seen in. At most ``k_merge``."""
    if not keys.size:
        return keys, np.zeros(0, dtype=np.float64)
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    total = np.zeros(len(uniq), dtype=np.float64)
    np.add.at(total, inv, contrib)
    order = np.lexsort((first, -total))[:k_merge]
    return uniq[order], total[order]


def blend(sparse_ids, sparse_scores, dense_ids, dense_scores,
          w_sparse: float = 0.5, k_merge: int = 100) -> tuple[np.ndarray, np.ndarray]:
    keys = np.concatenate([_keys(sparse_ids), _keys(dense_ids)])
    contrib = np.concatenate([w_sparse * normalise_max(sparse_scores), (1.0 - w_sparse) * normalise_minmax(dense_scores)])
    return _ranked(keys, contrib, k_merge)


def interleave(sparse_ids, dense_ids, k_merge: int = 100) -> tuple[np.ndarray, np.ndarray]:
    sp, de = _keys(sparse_ids), _keys(dense_ids)
    # BM25 first at every position: list positions 0, 0, 1, 1, ... as sort keys 0, 1, 2, 3, ...
    slot = np.concatenate([2 * np.arange(len(sp)), 2 * np.arange(len(de)) + 1])
    keys = np.concatenate([sp, de])[np.argsort(slot, kind="stable")]
    if not keys.size:
        return keys, np.zeros(0, dtype=np.float64)
    _, first = np.unique(keys, return_index=True)
    out = keys[np.sort(first)][:k_merge]
    return out, 1.0 - np.arange(len(out)) / max(k_merge, 1)


def rrf(sparse_ids, dense_ids, k: int = 60, k_merge: int = 100) -> tuple[np.ndarray, np.ndarray]:
    sp, de = _keys(sparse_ids), _keys(dense_ids)
    contrib = np.concatenate([1.0 / (k + np.arange(1, len(sp) + 1)), 1.0 / (k + np.arange(1, len(de) + 1))])
    ids, raw = _ranked(np.concatenate([sp, de]), contrib, k_merge)
    return ids, raw / raw[0] if raw.size else raw


def fuse(method: str, sparse_ids, sparse_scores, dense_ids, dense_scores, *, w_sparse: float = 0.5,
         k_merge: int = 100, rrf_k: int = 60) -> tuple[np.ndarray, np.ndarray]:
    if method == "blend":
        return blend(sparse_ids, sparse_scores, dense_ids, dense_scores, w_sparse=w_sparse, k_merge=k_merge)
    if method == "interleave":
        return interleave(sparse_ids, dense_ids, k_merge=k_merge)
    if method == "rrf":
        return rrf(sparse_ids, dense_ids, k=rrf_k, k_merge=k_merge)
    from pipeline.errors import UserError

    raise UserError(f"unknown fusion {method!r}: choose one of {', '.join(FUSIONS)}")
