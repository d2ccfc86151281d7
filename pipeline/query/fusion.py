"""Candidate fusion: how the BM25 list and the vector list become one candidate list.

Pure functions over ranked id lists and their raw scores. Each method returns
``(ids, fused)``: the merged candidate ids in order and a fused score in [0, 1] per id
(shown as the ``fused`` signal). Methods:

- ``blend``: weighted blend of the normalised scores (default 0.5 BM25 / 0.5 dense).
  BM25 is divided by the list's best score; dense cosine is min-max normalised over the
  list. A candidate missing from one list gets 0 there.
- ``interleave``: BM25 first, then alternate with the dense list, dropping duplicates,
  until ``k_merge`` ids (the classic K_SPARSE=50 / K_DENSE=50 / K_MERGE=100 recipe). Fused
  score = 1 - position / k_merge.
- ``rrf``: reciprocal rank fusion, sum of 1 / (k + rank), divided by its maximum.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def blend(sparse_ids: Sequence[str], sparse_scores, dense_ids: Sequence[str], dense_scores,
          w_sparse: float = 0.5, k_merge: int = 100) -> tuple[list[str], dict[str, float]]:
    fused: dict[str, float] = {}
    for cid, s in zip(sparse_ids, normalise_max(sparse_scores)):
        fused[cid] = fused.get(cid, 0.0) + w_sparse * float(s)
    for cid, s in zip(dense_ids, normalise_minmax(dense_scores)):
        fused[cid] = fused.get(cid, 0.0) + (1.0 - w_sparse) * float(s)
    ids = sorted(fused, key=lambda c: -fused[c])[:k_merge]
    return ids, {c: fused[c] for c in ids}


def interleave(sparse_ids: Sequence[str], dense_ids: Sequence[str], k_merge: int = 100) -> tuple[list[str], dict[str, float]]:
    out: list[str] = []
    seen: set[str] = set()
    for i in range(max(len(sparse_ids), len(dense_ids))):
        for lst in (sparse_ids, dense_ids):  # BM25 first at every position
            if i < len(lst) and lst[i] not in seen:
                seen.add(lst[i])
                out.append(lst[i])
    out = out[:k_merge]
    return out, {c: 1.0 - pos / max(k_merge, 1) for pos, c in enumerate(out)}


def rrf(sparse_ids: Sequence[str], dense_ids: Sequence[str], k: int = 60, k_merge: int = 100) -> tuple[list[str], dict[str, float]]:
    raw: dict[str, float] = {}
    for lst in (sparse_ids, dense_ids):
        for rank, cid in enumerate(lst, start=1):
            raw[cid] = raw.get(cid, 0.0) + 1.0 / (k + rank)
    ids = sorted(raw, key=lambda c: -raw[c])[:k_merge]
    top = raw[ids[0]] if ids else 1.0
    return ids, {c: raw[c] / top for c in ids}


def fuse(method: str, sparse_ids, sparse_scores, dense_ids, dense_scores, *, w_sparse: float = 0.5,
         k_merge: int = 100, rrf_k: int = 60) -> tuple[list[str], dict[str, float]]:
    if method == "blend":
        return blend(sparse_ids, sparse_scores, dense_ids, dense_scores, w_sparse=w_sparse, k_merge=k_merge)
    if method == "interleave":
        return interleave(sparse_ids, dense_ids, k_merge=k_merge)
    if method == "rrf":
        return rrf(sparse_ids, dense_ids, k=rrf_k, k_merge=k_merge)
    from pipeline.errors import UserError

    raise UserError(f"unknown fusion {method!r}: choose one of {', '.join(FUSIONS)}")
