"""The citation graph as a sparse matrix and CCBC scores (RACP Eq. 1 and Eq. 3) of blocks of corpus rows against
every work, from one sparse product per block (pure)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def adjacency(src: np.ndarray, dst: np.ndarray, n: int) -> sp.csr_matrix:
    """``A[i, j] = 1.0`` when i cites j; duplicate edges collapse, self-citations are dropped."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    a = sp.csr_matrix((np.ones(len(src), dtype=np.float64), (src, dst)), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1.0
    a.sort_indices()
    return a


@dataclass
class TopRelated:
    """Top-k related works of each requested row, flattened (one entry per (row, rank))."""

    row: np.ndarray  # vertex id of the corpus paper
    rank: np.ndarray  # 1..k
    col: np.ndarray  # vertex id of the related work
    weighted: np.ndarray
    naive: np.ndarray
    shared_refs: np.ndarray
    shared_citers: np.ndarray
    cites: np.ndarray  # row cites col
    cited_by: np.ndarray  # col cites row
    coupling: np.ndarray  # the shared-reference term of ``weighted`` (CCBC.coupling_at): what a reader keeps when it
    # re-scores the pair with a later run's weights and in-degrees (pipeline.query.ccbc_now)

    def __len__(self) -> int:
        return len(self.row)


def _row_index(m: sp.csr_matrix) -> np.ndarray:
    return np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))


def _with_data(m: sp.csr_matrix, data: np.ndarray) -> sp.csr_matrix:
    return sp.csr_matrix((data, m.indices, m.indptr), shape=m.shape)


def _ratio(inter: np.ndarray, union: np.ndarray) -> np.ndarray:
    """inter / union, 0 where union is 0 (then inter is 0 too): Jaccard without NaN."""
    return inter / np.maximum(union, 1e-300)


# One sparse product gives every channel of a pair at once. Its complex value is
#   real = sum of w over shared references
#   imag = shared_refs + 2**20 * shared_citers + 2**50 * [a cites b] + 2**51 * [b cites a]
# Packing integer counts into one float64 is exact while the total stays below 2**53, i.e. while
# a work cites fewer than 2**20 works and has fewer than 2**30 citers (checked). One product and no
# alignment of separate results (sorting, merging) is what makes RACP scale fit in minutes.
_CIT_SHIFT, _CITES_BIT, _CITED_BIT = 20, 50, 51


class CCBC:
    """Scores blocks of rows (corpus papers) against all works with one sparse product each."""

    def __init__(self, a: sp.csr_matrix, w: np.ndarray, hub_citers: int | None = None):
        a = a.tocsr()
        a.sort_indices()
        n = a.shape[0]
        at = a.T.tocsr()
        at.sort_indices()
        self.a, self.at, self.n = a, at, n
        self.w = np.asarray(w, dtype=np.float64)
        self.outdeg = np.diff(a.indptr).astype(np.float64)
        self.indeg = np.diff(at.indptr).astype(np.float64)
        if n and (self.outdeg.max() >= 2**_CIT_SHIFT or self.indeg.max() >= 2 ** (_CITES_BIT - _CIT_SHIFT)):
            raise ValueError("a work cites >= 2**20 works or has >= 2**30 citers: counts would not pack exactly")
        self.wref = a @ self.w  # sum of w over each work's references
        self._diag_m: sp.csr_matrix | None = None
        self._lower_m: sp.csr_matrix | None = None
        self._right: sp.csr_matrix | None = None
        self._right_light: sp.csr_matrix | None = None
        # hubs: references with more than hub_citers citers. Sharing one is cheap to bound and
        # expensive to enumerate (every pair of its citers), see related_top_k.
        self.heavy = (self.indeg > hub_citers) if hub_citers else np.zeros(n, dtype=bool)
        self.has_hubs = bool(self.heavy.any())
        if self.has_hubs:
            self.a_heavy = sp.csr_matrix(a @ sp.diags(self.heavy.astype(np.float64)))
            self.a_heavy.eliminate_zeros()
            self.hsum = self.a_heavy @ self.w  # sum of w over each work's hub references

    @property
    def _diag(self) -> sp.csr_matrix:
        if self._diag_m is None:
            self._diag_m = sp.identity(self.n, dtype=np.complex128, format="csr")
        return self._diag_m

    @property
    def _lower(self) -> sp.csr_matrix:
        # row c of the lower half: the references of c, each carrying 2**20 j, plus (c, c) = 2**51 j
        if self._lower_m is None:
            self._lower_m = (_with_data(self.a, np.full(self.a.nnz, 2.0**_CIT_SHIFT * 1j))
                             + self._diag * (2.0**_CITED_BIT * 1j))
        return self._lower_m

    @property
    def right_light(self) -> sp.csr_matrix:
        if self._right_light is None:
            keep = sp.diags((~self.heavy).astype(np.float64))
            self._right_light = self._stack(sp.csr_matrix(keep @ self.at))
        return self._right_light

    def _stack(self, at_part: sp.csr_matrix) -> sp.csr_matrix:
        # row r of the upper half: the citers of r, each carrying w(r) + 1j, plus (r, r) = 2**50 j
        at_part.eliminate_zeros()
        upper = _with_data(at_part, self.w[_row_index(at_part)] + 1j) + self._diag * (2.0**_CITES_BIT * 1j)
        return sp.vstack([upper, self._lower], format="csr")

    @property
    def right(self) -> sp.csr_matrix:
        if self._right is None:
            self._right = self._stack(self.at)
        return self._right

    def estimate(self, rows: np.ndarray, light: bool = False) -> np.ndarray:
        """Upper bound of candidate pairs per row (the product's work)."""
        indeg = np.where(self.heavy, 0.0, self.indeg) if light else self.indeg
        return (self.a[rows] @ indeg) + (self.at[rows] @ self.outdeg) + self.outdeg[rows] + self.indeg[rows] + 1

    def block(self, rows: np.ndarray, light: bool = False) -> dict[str, np.ndarray]:
        """Every pair (row, b) sharing a reference, a citer or a direct link, with its weighted score.

        Returns ``indptr`` (per block row), ``col`` and ``weighted`` (Eq. 3) grouped by row and
        unsorted within a row, and ``packed`` (the product's imaginary part, see ``unpack``). The
        pair (a, a) is included when a has any link. ``light``: hub references count only as direct
        links (pairs sharing nothing but hubs are left out, shared_w/shared_refs exclude hubs).
        """
        rows = np.asarray(rows, dtype=np.int64)
        left = sp.hstack([self.a[rows], self.at[rows]], format="csr")  # refs(a) | citers(a)
        p = left @ (self.right_light if light else self.right)
        del left
        counts = np.diff(p.indptr)
        rb = p.indices
        parts = p.data.view(np.float64).reshape(-1, 2)  # real, imag without copies
        shared_w = parts[:, 0]
        packed = parts[:, 1].astype(np.int64)
        # 1/3 sum_shared w / sum_union w, on every pair (most pairs share only references)
        den = np.repeat(self.wref[rows], counts)
        den += self.wref[rb]
        den -= shared_w
        np.maximum(den, 1e-300, out=den)
        weighted = np.divide(shared_w, den, out=den)
        weighted /= 3.0
        # 1/3 w(A) w(B) J(citers), only where citers are shared
        idx = np.flatnonzero(packed >= 2**_CIT_SHIFT)
        if len(idx):
            ra = rows[np.searchsorted(p.indptr, idx, side="right") - 1]
            sb = rb[idx]
            sc = ((packed[idx] >> _CIT_SHIFT) & (2 ** (_CITES_BIT - _CIT_SHIFT) - 1)).astype(np.float64)
            weighted[idx] += self.w[ra] * self.w[sb] * _ratio(sc, self.indeg[ra] + self.indeg[sb] - sc) / 3.0
            # 1/6 w(B) I(A cites B) + 1/6 w(A) I(B cites A), only on direct links
            d = idx[packed[idx] >= 2**_CITES_BIT]
            ra = rows[np.searchsorted(p.indptr, d, side="right") - 1]
            bits = packed[d] >> _CITES_BIT
            weighted[d] += ((bits & 1) * self.w[rb[d]] + ((bits >> 1) & 1) * self.w[ra]) / 6.0
        return {"indptr": p.indptr, "col": rb, "weighted": weighted, "packed": packed, "shared_w": shared_w}

    @staticmethod
    def unpack(packed: np.ndarray) -> dict[str, np.ndarray]:
        """shared_refs, shared_citers, cites (row cites col), cited_by (col cites row)."""
        return {"shared_refs": packed & (2**_CIT_SHIFT - 1),
                "shared_citers": (packed >> _CIT_SHIFT) & (2 ** (_CITES_BIT - _CIT_SHIFT) - 1),
                "cites": ((packed >> _CITES_BIT) & 1).astype(bool),
                "cited_by": ((packed >> _CITED_BIT) & 1).astype(bool)}

    def coupling_at(self, ra, rb, shared_w) -> np.ndarray:
        """Eq. 3's bibliographic-coupling term at pairs (ra, rb): 1/3 sum_shared w / sum_union w."""
        return _ratio(shared_w, self.wref[ra] + self.wref[rb] - shared_w) / 3.0

    def weighted_at(self, ra, rb, shared_w, shared_citers, cites, cited_by) -> np.ndarray:
        """Eq. 3 at pairs (ra, rb) from their components."""
        w = self.w
        sc = shared_citers.astype(np.float64)
        return (self.coupling_at(ra, rb, shared_w)
                + w[ra] * w[rb] * _ratio(sc, self.indeg[ra] + self.indeg[rb] - sc) / 3.0
                + (cites * w[rb] + cited_by * w[ra]) / 6.0)

    def hub_shares(self, ra: np.ndarray, rb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sum of w, count) over the hub references shared by each pair (ra, rb)."""
        z = self.a_heavy[ra].multiply(self.a_heavy[rb]).tocsr()
        return np.asarray(z @ self.w).ravel(), np.diff(z.indptr).astype(np.int64)

    def naive(self, ra: np.ndarray, rb: np.ndarray, shared_refs, shared_citers, cites, cited_by) -> np.ndarray:
        """Eq. 1 at pairs (ra, rb) from their components."""
        o, i = self.outdeg, self.indeg
        return 0.4 * (0.5 * (cites | cited_by)
                      + _ratio(shared_refs.astype(np.float64), o[ra] + o[rb] - shared_refs)
                      + _ratio(shared_citers.astype(np.float64), i[ra] + i[rb] - shared_citers))


def ccbc_scores(a: sp.csr_matrix, w: np.ndarray, rows: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(weighted, naive) CCBC of ``rows`` against all works, as sparse matrices over the candidate
    pairs (for small graphs and tests)."""
    rows = np.asarray(rows, dtype=np.int64)
    c = CCBC(a, w)
    b = c.block(rows)
    r_local = np.searchsorted(b["indptr"], np.arange(len(b["col"])), side="right") - 1
    naive = c.naive(rows[r_local], b["col"], **CCBC.unpack(b["packed"]))
    shape = (len(rows), c.n)
    return (sp.csr_matrix((b["weighted"], b["col"], b["indptr"]), shape=shape),
            sp.csr_matrix((naive, b["col"], b["indptr"]), shape=shape))
