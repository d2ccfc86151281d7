"""Citation-graph metrics: PageRank, a power-law fit of citation counts, survival weights, and
naive/weighted CCBC related papers (RACP Eq. 1 and Eq. 3).

The graph is every work in ``works`` plus every endpoint of ``citations`` (citing -> cited).
Corpus papers are the works with a ``paper_id``. Math is in pure functions over NumPy arrays and
SciPy sparse matrices (tested directly); ``run_graph`` does the I/O around them.

Notation: ``A`` is the N x N adjacency matrix, ``A[i, j] = 1`` when work i cites work j;
``refs(x)`` is row x of A, ``citers(x)`` is column x. For a corpus paper a and any work b:

- naive (Eq. 1): ``2/5 * (1/2 I(a cites b or b cites a) + J(refs a, refs b) + J(citers a, citers b))``
- weighted (Eq. 3): ``1/6 w(a) I(b cites a) + 1/6 w(b) I(a cites b)
  + 1/3 sum_{C in refs a & refs b} w(C) / sum_{C in refs a | refs b} w(C)
  + 1/3 w(a) w(b) J(citers a, citers b)``

where J is the Jaccard index (0 when both sets are empty) and ``w(x) = 1 - cdf(c(x))`` is the
survival function of the power law fitted to citation counts, with ``w = 1`` below ``xmin``.
Both scores lie in [0, 1]. Only pairs sharing a reference, a citer or a direct link are scored:
one sparse product ``[A | A.T][rows] @ [[A.T], [A]]`` (plus diagonals for the direct links) yields
exactly those pairs with all their counts (see ``CCBC``), for blocks of corpus rows so memory stays
bounded at RACP scale. ``related_top_k`` does the same per row in one compiled pass that keeps only the
pairs that can rank (pipeline/steps/ccbc_kernel.py, numba), with bit-identical results.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from pipeline import catalog_changes, progress
from pipeline.steps.catalog import part_starts
from pipeline.steps.pagerank import PageRankJob
from pipeline.steps.related_plan import Previous, change_share, plan_related
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)


# ================================================================================================
# Graph construction (pure)
# ================================================================================================
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


# ================================================================================================
# Power law (pure)
# ================================================================================================
@dataclass
class PowerLawFit:
    status: str  # 'ok' | 'too_few' | 'error: ...'
    n_works: int
    n_positive: int
    discrete: bool
    xmin: float | None = None
    alpha: float | None = None
    sigma: float | None = None
    n_tail: int | None = None
    ks_d: float | None = None
    compared_to: str | None = "lognormal"
    loglikelihood_ratio: float | None = None
    p_value: float | None = None

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def fit_powerlaw(counts: np.ndarray, *, discrete: bool = False, min_n: int = 50,
                 xmin: float | None = None, compare_to: str = "lognormal") -> tuple[PowerLawFit, object | None]:
    """Fit a power law to the positive citation counts with the ``powerlaw`` package.

    xmin minimises the KS distance (unless given), alpha is the MLE; the fit is then compared with
    ``compare_to`` by a normalised log-likelihood ratio. Returns (summary, powerlaw.Fit or None).
    Fewer than ``min_n`` positive counts (or fewer than 3 distinct values) -> status 'too_few'.
    """
    import powerlaw

    counts = np.asarray(counts, dtype=np.float64)
    pos = counts[counts >= 1]
    res = PowerLawFit(status="too_few", n_works=int(len(counts)), n_positive=int(len(pos)), discrete=discrete,
                      compared_to=compare_to)
    if len(pos) < min_n or len(np.unique(pos)) < 3:
        return res, None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if xmin is None and not discrete:
                xmin = ks_xmin(pos)
            fit = powerlaw.Fit(pos, discrete=discrete, xmin=xmin, verbose=0)
            pl = fit.power_law
            r, p = fit.distribution_compare("power_law", compare_to, normalized_ratio=True)
        res.status = "ok"
        res.xmin, res.alpha, res.sigma = float(pl.xmin), float(pl.alpha), float(pl.standard_err)
        res.n_tail = int(np.sum(pos >= pl.xmin))
        res.ks_d = float(pl.D)
        res.loglikelihood_ratio, res.p_value = float(r), float(p)
        if not (math.isfinite(res.alpha) and res.alpha > 1):
            res.status = "error: no usable alpha"
            return res, None
        return res, fit
    except Exception as exc:  # noqa: BLE001 - a failed fit must not stop the graph step
        res.status = f"error: {type(exc).__name__}: {exc}"[:200]
        return res, None


def ks_xmin(values: np.ndarray) -> float | None:
    """The xmin that ``powerlaw.Fit(values, discrete=False)`` would choose, in O(n log n + m^2) for m distinct
    values instead of the library's O(n * m).

    Hand-written because the library's KS search builds a full ``Power_Law`` per candidate xmin, each
    trimming and summing all n values (262 s of a 6M-work graph run). This computes the same quantities on
    the distinct values with suffix sums: for candidate xmin = u_k (every distinct value but the two
    largest, as the library tries them), the tail's MLE ``alpha = 1 + n_k / sum(log(x / xmin))`` and the KS
    distance between the library's empirical CDF (its ``fitting_cdf``: the share of values strictly below
    each distinct value, renormalised above xmin) and ``1 - (x / xmin)^(1 - alpha)``. Where the library
    would not use that closed form (alpha outside (1.5, 3]: it fits numerically), the candidate is handed
    to the library itself. The choice is the library's: the smallest distance among candidates with
    ``0 < alpha < 3``, else among all. tests/test_graph.py checks it against ``powerlaw.Fit``.
    ``None`` (let the library decide) when fewer than 4 distinct values (under 2 candidates).
    """
    import powerlaw

    x = np.sort(np.asarray(values, dtype=np.float64))
    x = x[x > 0]
    n = len(x)
    u, first = np.unique(x, return_index=True)
    if len(u) < 4:  # fewer than 2 candidates: the library gives up (nan xmin); let it say so
        return None
    below = first / n  # the library's fitting_cdf: share of values < u_j
    logs = np.log(x)
    suffix = np.concatenate([np.cumsum(logs[::-1])[::-1], [0.0]])
    cand = np.arange(len(u) - 2)  # not the largest value (== xmax) nor the one before it, as the library
    n_tail = (n - first[cand]).astype(np.float64)
    alpha = 1 + n_tail / (suffix[first[cand]] - n_tail * np.log(u[cand]))
    dist = np.full(len(cand), np.nan)
    valid = np.zeros(len(cand), dtype=bool)
    parent = None
    for k in cand:
        a = alpha[k]
        if 1.5 < a <= 3:
            bins = u[k:]
            actual = (below[k:] - below[k]) / (1 - below[k])
            theory = 1 - (bins / u[k]) ** (1 - a) if a < 3 else np.full(len(bins), 10.0 ** sys.float_info.min_10_exp)
            diff = theory - actual
            dist[k] = max(diff.max(), -diff.min())
            valid[k] = a < 3
        else:  # the library fits this one numerically: let it
            if parent is None:
                parent = powerlaw.Fit(x, discrete=False, xmin=float(u[0]), verbose=0)
            pl = powerlaw.Power_Law(xmin=u[k], xmax=None, discrete=False, fit_method=parent.fit_method, data=x,
                                    parameters=parent.initial_parameters, parameter_ranges=parent.parameter_ranges,
                                    parameter_constraints=parent.parameter_constraints, parent_Fit=parent,
                                    estimate_discrete=parent.estimate_discrete, verbose=0)
            dist[k] = pl.D
            valid[k] = pl.in_range() and not pl.noise_flag
    best = int(np.ma.masked_array(dist, mask=~valid).argmin()) if valid.any() else int(np.argmin(dist))
    return float(u[best])


def survival_weights(counts: np.ndarray, fit) -> np.ndarray:
    """``w(c) = 1 - cdf(c) = P(C >= c)`` under the fitted power law (``powerlaw``'s ccdf).

    Below xmin the power law says nothing, so ``w = 1`` there (as for ``c = 0``): a paper is only
    discounted once its citation count is in the fitted tail. At ``c = xmin`` the survival is 1, so
    w is continuous and non-increasing in c, and within [0, 1]. ``fit=None`` -> all ones.
    """
    counts = np.asarray(counts, dtype=np.float64)
    w = np.ones(len(counts), dtype=np.float64)
    if fit is None:
        return w
    pl = fit.power_law
    tail = counts >= pl.xmin
    if not tail.any():
        return w
    values, inverse = np.unique(counts[tail], return_inverse=True)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        s = np.asarray(pl.ccdf(values), dtype=np.float64)
    if len(s) != len(values):  # defensive: powerlaw trims to its own [xmin, xmax]
        raise RuntimeError("powerlaw ccdf returned a different number of values")
    s = np.nan_to_num(s, nan=0.0, posinf=1.0, neginf=0.0)
    s = np.minimum.accumulate(np.clip(s, 0.0, 1.0))  # exact monotonicity despite rounding
    w[tail] = s[inverse]
    return w


# ================================================================================================
# CCBC (pure)
# ================================================================================================
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


def iter_blocks(est: np.ndarray, max_nnz: int, max_rows: int = 4096) -> Iterator[slice]:
    """Consecutive slices whose summed estimate stays under ``max_nnz`` (at least one row each)."""
    start, acc = 0, 0.0
    for i, e in enumerate(est):
        if i > start and (acc + e > max_nnz or i - start >= max_rows):
            yield slice(start, i)
            start, acc = i, 0.0
        acc += e
    if start < len(est):
        yield slice(start, len(est))


def _top_candidates(indptr: np.ndarray, data: np.ndarray, k: int,
                    slack: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Entries that can be in their row's top k, and the rows that need a full recomputation.

    Per row, thr = the (k+1)-th largest value (one of them may be the paper itself; -inf when the
    row has <= k+1 entries). Without ``slack`` an entry qualifies when value >= thr. With a slack
    (values are lower bounds, true <= value + slack; pairs missing from the row score <= slack) an
    entry qualifies when value + slack >= thr, and a row with slack > 0 and slack >= thr is returned
    as needing full recomputation instead. A loop over rows, not pairs."""
    nrows = len(indptr) - 1
    full = np.zeros(nrows, dtype=bool)
    picks = []
    for i in range(nrows):
        s0, s1 = indptr[i], indptr[i + 1]
        sk = 0.0 if slack is None else slack[i]
        thr = -np.inf
        if s1 - s0 > k + 1:
            thr = np.partition(data[s0:s1], s1 - s0 - (k + 1))[s1 - s0 - (k + 1)]
        if sk > 0 and sk >= thr:
            full[i] = True
        elif thr == -np.inf:
            picks.append(np.arange(s0, s1))
        else:
            picks.append(np.flatnonzero(data[s0:s1] >= thr - sk) + s0)
    return (np.concatenate(picks) if picks else np.zeros(0, dtype=np.int64)), full


class _KernelCandidates:
    """``CCBC.block`` + ``_top_candidates`` as one compiled pass per row (pipeline/steps/ccbc_kernel.py),
    rows split over ``threads`` threads (the kernel releases the GIL), each with its own accumulator."""

    def __init__(self, c: CCBC, threads: int):
        n = c.n
        # accumulator slots by decreasing degree: the works touched most share a cache-resident stretch
        order = np.argsort(-(c.indeg + c.outdeg), kind="stable")
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n, dtype=np.int64)
        self.c, self.inv = c, order.astype(np.int64)
        self.a_ptr, self.a_idx = c.a.indptr.astype(np.int64), c.a.indices
        self.a_idx_p = pos[c.a.indices].astype(np.int32)
        self.at_ptr, self.at_idx_p = c.at.indptr.astype(np.int64), pos[c.at.indices].astype(np.int32)
        del pos
        self.attr = np.ascontiguousarray(np.stack([c.w[order], c.wref[order], c.indeg[order], np.zeros(n)], axis=1))
        if c.has_hubs:
            # CCBC.hub_shares sums a pair's shared hubs in increasing id (a_heavy's rows come out of the
            # product in decreasing id; the general elementwise product reverses them): the kernel merges
            # sorted rows
            ah = c.a_heavy.copy()
            ah.sort_indices()
            self.h_ptr, self.h_idx = ah.indptr.astype(np.int64), ah.indices
        else:
            self.h_ptr, self.h_idx = np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
        self.threads = max(1, threads)
        self.spaces: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(self.threads):
            self.spaces.put((np.zeros((n, 2), dtype=np.float64), np.empty(n, dtype=np.int64),
                             np.empty(n, dtype=np.float64), np.empty(n, dtype=np.int64)))
        self.pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def _run(self, rows: np.ndarray, slack: np.ndarray, k: int, light: bool) -> tuple[np.ndarray, ...]:
        from pipeline.steps.ccbc_kernel import top_candidates as kernel_fn

        top_candidates: Any = kernel_fn  # a numba dispatcher: mypy sees no signature
        c = self.c
        full = np.zeros(len(rows), dtype=bool)
        parts: list[tuple[np.ndarray, ...]] = []
        done, cap = 0, len(rows) * (k + 2) + 64
        space = self.spaces.get()
        try:
            while done < len(rows):
                buf = (np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.float64),
                       np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.int64))
                nd, no, need = top_candidates(
                    rows[done:], slack[done:], k, light, light and c.has_hubs,
                    self.a_ptr, self.a_idx, self.a_idx_p, self.at_ptr, c.at.indices, self.at_idx_p, c.heavy, self.inv,
                    c.w, c.wref, c.indeg, self.attr, self.h_ptr, self.h_idx, *space, *buf,
                    full[done:])
                parts.append((buf[0][:no] + done,) + tuple(x[:no] for x in buf[1:]))
                done += nd
                cap = max(cap, 2 * need)
        finally:
            self.spaces.put(space)
        return tuple(np.concatenate([p[f] for p in parts]) for f in range(6)) + (full,)

    def __call__(self, rows: np.ndarray, slack: np.ndarray | None, k: int,
                 light: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(local row index, col, shared_w, packed, hub w, hub count, full) as ``CCBC.block`` +
        ``_top_candidates`` (+ ``CCBC.hub_shares`` in light mode) would give them."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        slack = np.zeros(len(rows)) if slack is None else np.ascontiguousarray(slack, dtype=np.float64)
        nparts = min(len(rows), 4 * self.threads) if self.pool is not None else 1
        bounds = np.linspace(0, len(rows), max(nparts, 1) + 1).astype(np.int64)
        parts = [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
        if self.pool is None or len(parts) < 2:
            res = [self._run(rows[lo:hi], slack[lo:hi], k, light) for lo, hi in parts]
        else:
            res = list(self.pool.map(lambda lh: self._run(rows[lh[0]:lh[1]], slack[lh[0]:lh[1]], k, light), parts))
        if not res:
            e = np.zeros(0, dtype=np.int64)
            return e, e, np.zeros(0), e, np.zeros(0), e, np.zeros(0, dtype=bool)
        cr = np.concatenate([r[0] + lo for r, (lo, _) in zip(res, parts)])
        out = [np.concatenate([r[f] for r in res]) for f in range(1, 7)]
        return cr, out[0], out[1], out[2], out[3], out[4], out[5]


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def related_top_k(a: sp.csr_matrix, w: np.ndarray, rows: np.ndarray, k: int = 50, *,
                  max_block_nnz: int = 10_000_000, hub_citers: int | None = None, progress=None,
                  engine: str = "auto", threads: int | None = None) -> TopRelated:
    """Top-k works by weighted CCBC for each of ``rows`` (ties: naive desc, then vertex id). Exact.

    Works sharing nothing with a row are not candidates, so a row can get fewer than k.

    ``hub_citers``: references with more citers than this are hubs. A hub shared by two papers adds
    at most ``2/3 * H(a) / W(a)`` to the pair's weighted score (H = w summed over a's hub references,
    W = over all its references), and enumerating every pair of a hub's citers dominates the cost.
    So each block is first scored without hub sharing (a lower bound); pairs whose bound plus that
    slack reaches the row's (k+1)-th best lower bound get their hub shares added exactly, and rows
    where a hub-only pair could still make the top k are recomputed in full. The result is the same
    as without hubs (tested), only cheaper.
    ``progress(n_rows_done)`` is called after each block.

    ``engine``: how each block's candidates are found. ``"sparse"``: one SciPy product per block
    (``CCBC.block``), every pair scored with NumPy, then ``_top_candidates``. ``"numba"``: the same
    candidates with the same values from one compiled pass per row that keeps only them
    (pipeline/steps/ccbc_kernel.py; several times faster, no product in memory), over ``threads``
    threads (default: the CPUs this process may use). ``"auto"``: numba when it is installed. Both give
    identical results, bit for bit (tests/test_graph.py).
    """
    if engine not in ("auto", "numba", "sparse"):
        raise ValueError(f"engine must be 'auto', 'numba' or 'sparse', not {engine!r}")
    if engine == "auto":
        engine = "numba" if _numba_available() else "sparse"
    rows = np.asarray(rows, dtype=np.int64)
    ccbc = CCBC(a, w, hub_citers=hub_citers)
    light = ccbc.has_hubs
    out: dict[str, list[np.ndarray]] = {f: [] for f in TopRelated.__dataclass_fields__}
    est = ccbc.estimate(rows, light=light) if len(rows) else np.zeros(0)
    kern = _KernelCandidates(ccbc, threads or _threads()) if engine == "numba" and len(rows) else None
    try:
        for sl in iter_blocks(est, max_block_nnz):
            blk = rows[sl]
            slack = None
            if light:
                hs = ccbc.hsum[blk]
                slack = np.where(hs > 0, (2.0 / 3.0) * hs / np.maximum(ccbc.wref[blk], 1e-300), 0.0)
            if kern is not None:
                ra, rb, sw, comp = _kernel_block(kern, ccbc, blk, slack, k, light)
            else:
                ra, rb, sw, comp = _sparse_block(ccbc, blk, slack, k, light)
            _finish_block(ccbc, out, ra, rb, sw, comp, k)
            if progress is not None:
                progress(len(blk))
    finally:
        if kern is not None:
            kern.close()
    empty = {"row": np.int64, "rank": np.int32, "col": np.int64, "weighted": np.float64, "naive": np.float64,
             "shared_refs": np.int32, "shared_citers": np.int32, "cites": bool, "cited_by": bool, "coupling": np.float64}
    res = TopRelated(**{f: (np.concatenate(v) if v else np.zeros(0, dtype=empty[f])) for f, v in out.items()})
    if light:  # rows are sorted within blocks; keep the overall order by row, then rank
        o = np.lexsort((res.rank, res.row))
        res = TopRelated(**{f: getattr(res, f)[o] for f in TopRelated.__dataclass_fields__})
    return res


Candidates = tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]


def _sparse_block(ccbc: CCBC, blk: np.ndarray, slack: np.ndarray | None, k: int, light: bool) -> Candidates:
    """A block's candidates (ra, rb, shared_w, components) from the sparse product."""
    b = ccbc.block(blk, light=light)
    cand, full = _top_candidates(b["indptr"], b["weighted"], k, slack)
    cr = np.searchsorted(b["indptr"], cand, side="right") - 1
    ra, rb = blk[cr], b["col"][cand].astype(np.int64)
    sw = b["shared_w"][cand]
    comp = CCBC.unpack(b["packed"][cand])
    del b
    if light:
        hw, hn = ccbc.hub_shares(ra, rb)
        sw = sw + hw
        comp["shared_refs"] = comp["shared_refs"] + hn
        redo = blk[full]
        if len(redo):  # rows where a pair sharing only hubs could still rank: no shortcut
            bf = ccbc.block(redo)
            fc, _ = _top_candidates(bf["indptr"], bf["weighted"], k)
            fr = np.searchsorted(bf["indptr"], fc, side="right") - 1
            ra = np.concatenate([ra, redo[fr]])
            rb = np.concatenate([rb, bf["col"][fc].astype(np.int64)])
            sw = np.concatenate([sw, bf["shared_w"][fc]])
            fcomp = CCBC.unpack(bf["packed"][fc])
            comp = {f: np.concatenate([comp[f], fcomp[f]]) for f in comp}
            del bf
    return ra, rb, sw, comp


def _kernel_block(kern: _KernelCandidates, ccbc: CCBC, blk: np.ndarray, slack: np.ndarray | None, k: int,
                  light: bool) -> Candidates:
    """The same candidates as ``_sparse_block``, from the compiled pass."""
    cr, rb, sw, packed, hw, hn, full = kern(blk, slack, k, light)
    ra = blk[cr]
    comp = CCBC.unpack(packed)
    if light:
        sw = sw + hw
        comp["shared_refs"] = comp["shared_refs"] + hn
        redo = blk[full]
        if len(redo):  # rows where a pair sharing only hubs could still rank: no shortcut
            fr, frb, fsw, fpacked, _, _, _ = kern(redo, None, k, False)
            ra = np.concatenate([ra, redo[fr]])
            rb = np.concatenate([rb, frb])
            sw = np.concatenate([sw, fsw])
            fcomp = CCBC.unpack(fpacked)
            comp = {f: np.concatenate([comp[f], fcomp[f]]) for f in comp}
    return ra, rb, sw, comp


def _finish_block(ccbc: CCBC, out: dict[str, list[np.ndarray]], ra: np.ndarray, rb: np.ndarray, sw: np.ndarray,
                  comp: dict[str, np.ndarray], k: int) -> None:
    """Exact scores of a block's candidates, ranked; the top k of each row appended to ``out``."""
    not_self = ra != rb
    ra, rb, sw = ra[not_self], rb[not_self], sw[not_self]
    comp = {f: v[not_self] for f, v in comp.items()}
    cw = ccbc.weighted_at(ra, rb, sw, comp["shared_citers"], comp["cites"], comp["cited_by"])
    naive = ccbc.naive(ra, rb, **comp)
    order = np.lexsort((rb, -naive, -cw, ra))
    ra, rb, cw, naive, sw = ra[order], rb[order], cw[order], naive[order], sw[order]
    comp = {f: v[order] for f, v in comp.items()}
    rank = np.arange(len(ra)) - np.searchsorted(ra, ra, side="left") + 1
    keep = rank <= k
    out["row"].append(ra[keep])
    out["rank"].append(rank[keep].astype(np.int32))
    out["col"].append(rb[keep])
    out["weighted"].append(cw[keep])
    out["naive"].append(naive[keep])
    out["shared_refs"].append(comp["shared_refs"][keep].astype(np.int32))
    out["shared_citers"].append(comp["shared_citers"][keep].astype(np.int32))
    out["cites"].append(comp["cites"][keep])
    out["cited_by"].append(comp["cited_by"][keep])
    out["coupling"].append(ccbc.coupling_at(ra[keep], rb[keep], sw[keep]))


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


# ================================================================================================
# I/O: DuckDB -> arrays, results -> DuckDB
# ================================================================================================
@dataclass
class CitationGraphData:
    work_ids: list[str]
    paper_ids: list[str | None]
    reported: np.ndarray  # works.citation_count (0 when unknown)
    a: sp.csr_matrix
    is_corpus: np.ndarray  # bool per vertex: the work is a corpus paper

    @property
    def n(self) -> int:
        return len(self.work_ids)

    @property
    def corpus_rows(self) -> np.ndarray:
        return np.flatnonzero(self.is_corpus).astype(np.int64)


def load_graph(con) -> CitationGraphData:
    """Vertices = works plus citation endpoints (ordered by work_id); edges as integer arrays."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _graph_vertices AS
        SELECT (row_number() OVER (ORDER BY work_id) - 1)::BIGINT AS vid, work_id, paper_id, reported
        FROM (
            SELECT work_id, max(paper_id) AS paper_id, coalesce(max(citation_count), 0) AS reported
            FROM (
                SELECT work_id, paper_id, citation_count FROM works
                UNION ALL SELECT citing_work_id, NULL, NULL FROM citations
                UNION ALL SELECT cited_work_id, NULL, NULL FROM citations
            ) GROUP BY work_id
        )""")
    try:
        v = con.sql("SELECT work_id, paper_id, reported FROM _graph_vertices ORDER BY vid").to_arrow_table()
        e = con.execute("""
            SELECT s.vid AS src, d.vid AS dst FROM citations c
            JOIN _graph_vertices s ON s.work_id = c.citing_work_id
            JOIN _graph_vertices d ON d.work_id = c.cited_work_id""").fetchnumpy()
    finally:
        con.execute("DROP TABLE IF EXISTS _graph_vertices")
    n = v.num_rows
    a = adjacency(np.asarray(e["src"], dtype=np.int64), np.asarray(e["dst"], dtype=np.int64), n)
    reported = v.column("reported").to_numpy(zero_copy_only=False).astype(np.int64)
    return CitationGraphData(work_ids=v.column("work_id").to_pylist(), paper_ids=v.column("paper_id").to_pylist(),
                             reported=reported, a=a,
                             is_corpus=v.column("paper_id").is_valid().to_numpy(zero_copy_only=False))


class StageTimer:
    """Default meter: wall time per stage (the benchmark passes one that also samples memory)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - t0, 3)

    def keep(self, name: str, obj) -> None:  # the benchmark keeps the igraph Graph
        pass


def replace_rows(wh, table: str, ddl: str, rows) -> None:
    """Replace every row of ``table`` by the Arrow table ``rows``, in the caller's transaction: the table is dropped
    and created again from its DDL (``ddl``, under sql/). DuckDB deletes a primary-key table's rows one index entry
    at a time: at 100,000 papers (5.2M related rows) DELETE + INSERT took 49 s, this 9-10 s."""
    wh.con.execute(f"DROP TABLE {table}")
    wh.sql_file(ddl)
    wh.con.register("_rows", rows)
    try:
        wh.con.execute(f"INSERT INTO {table} ({', '.join(rows.column_names)}) SELECT * FROM _rows")
    finally:
        wh.con.unregister("_rows")


def previous_run(con, starts: list[str] | None = None) -> Previous:
    """What the runs before left (see :mod:`pipeline.steps.related_plan`): the corpus papers' degrees in
    ``paper_metrics``, the run that computed each stored list in ``related``, the last successful run's ``top_k`` and
    what its sweep owed, and every successful run's change (``run_log``); ``starts``: where the published
    ``related``'s partitions start (:func:`pipeline.steps.catalog.part_starts`)."""
    degrees = {p: (int(i), int(o)) for p, i, o in con.execute(
        "SELECT paper_id, in_degree, out_degree FROM paper_metrics WHERE paper_id IS NOT NULL").fetchall()}
    computed_by = dict(con.execute("SELECT paper_id, min(run_id) FROM related GROUP BY paper_id").fetchall())
    runs = con.execute("""
        SELECT run_id, CAST(counts->>'degrees_changed' AS BIGINT), 2 * CAST(counts->>'edges' AS BIGINT),
               CAST(counts->>'related_top_k' AS INTEGER), CAST(counts->>'related_owed_milli' AS BIGINT)
        FROM run_log WHERE step = 'graph' AND status = 'ok' ORDER BY run_id""").fetchall()
    top_k = next((k for *_, k, _ in reversed(runs) if k is not None), None)
    incoming = dict(con.execute("SELECT run_id, count(*) FROM related_incoming GROUP BY run_id").fetchall())
    return Previous(degrees, computed_by, top_k, starts,
                    runs=[(r, None if changed is None or total is None else change_share(changed, total))
                          for r, changed, total, _, _ in runs],
                    owed=(runs[-1][4] or 0) / 1000 if runs else 0.0, incoming=incoming)


def degrees_changed(con, work_ids, in_degree: np.ndarray, out_degree: np.ndarray) -> int:
    """The sum over works of |change of in-degree| + |change of out-degree| since the run whose degrees
    ``paper_metrics`` holds (a work new since, or gone: all of its degrees), for :func:`change_share`."""
    import pyarrow as pa

    con.register("_degrees_now", pa.table({"work_id": work_ids, "in_degree": in_degree, "out_degree": out_degree}))
    try:
        return int(con.execute("""
            SELECT coalesce(sum(abs(coalesce(n.in_degree, 0) - coalesce(p.in_degree, 0))
                                + abs(coalesce(n.out_degree, 0) - coalesce(p.out_degree, 0))), 0)
            FROM _degrees_now n FULL OUTER JOIN paper_metrics p ON p.work_id = n.work_id""").fetchall()[0][0])
    finally:
        con.unregister("_degrees_now")


def replace_lists(wh, papers: list[str], rows) -> None:
    """Replace the stored related lists of ``papers`` (recomputed, or gone from the corpus) by ``rows``, in the
    caller's transaction: only those papers' rows are deleted (a night's new and changed papers and those whose
    turn it is), the rest are kept."""
    import pyarrow as pa

    wh.con.register("_replaced", pa.table({"paper_id": pa.array(papers, pa.string())}))
    wh.con.register("_rows", rows)
    try:
        wh.con.execute("DELETE FROM related WHERE paper_id IN (SELECT paper_id FROM _replaced)")
        wh.con.execute(f"INSERT INTO related ({', '.join(rows.column_names)}) SELECT * FROM _rows")
    finally:
        wh.con.unregister("_replaced")
        wh.con.unregister("_rows")


def incoming_table(rel: TopRelated, rows: np.ndarray, work_ids: np.ndarray, paper_ids: np.ndarray, run_id: str):
    """The ``related_incoming`` rows (sql/core/075_related_incoming.sql) of the lists in ``rel`` of the vertex ``rows``
    (a run's new and changed papers): each entry that names a corpus paper, seen from that paper (``cites`` and
    ``cited_by`` swap), keyed by the run and the paper named, in key order."""
    import pyarrow as pa

    idx = np.flatnonzero(np.isin(rel.row, rows))  # the new and changed papers' entries (few), then those naming
    idx = idx[np.fromiter((paper_ids[c] is not None for c in rel.col[idx]), dtype=bool, count=len(idx))]  # a paper
    named_ids = paper_ids[rel.col[idx]].tolist()
    return pa.table({
        "entry_key": pa.array([f"{run_id}/{p}" for p in named_ids], pa.string()),
        "related_paper_id": pa.array(named_ids, pa.string()),
        "paper_id": pa.array(paper_ids[rel.row[idx]].tolist(), pa.string()),
        "work_id": pa.array(work_ids[rel.row[idx]].tolist(), pa.string()),
        "ccbc_weighted": rel.weighted[idx],
        "ccbc_naive": rel.naive[idx],
        "shared_references": rel.shared_refs[idx],
        "shared_citers": rel.shared_citers[idx],
        "cites": rel.cited_by[idx],  # the named paper cites the list's paper
        "cited_by": rel.cites[idx],
        "run_id": pa.array([run_id] * len(idx), pa.string()),
        "coupling": rel.coupling[idx],
    }).sort_by("entry_key")


def update_incoming(wh, rows) -> int:
    """Append a run's ``related_incoming`` ``rows`` (:func:`incoming_table`; none on a full refresh) and drop the rows
    of runs no newer than every stored list (no list is older, so none reads them) and of papers no longer in the
    corpus, in the caller's transaction, with the keys logged for the publish. Returns the rows dropped."""
    if rows.num_rows:
        wh.con.register("_incoming", rows)
        try:
            wh.con.execute(f"INSERT INTO related_incoming ({', '.join(rows.column_names)}) SELECT * FROM _incoming")
        finally:
            wh.con.unregister("_incoming")
        catalog_changes.record(wh.con, "related_incoming", rows.column("entry_key").to_pylist())
    oldest = (wh.con.execute("SELECT min(run_id) FROM related").fetchone() or (None,))[0]
    return catalog_changes.returning(
        wh.con, "related_incoming",
        "DELETE FROM related_incoming WHERE ? IS NULL OR run_id <= ? OR paper_id NOT IN (SELECT paper_id FROM papers) "
        "RETURNING entry_key", [oldest, oldest])


@writes("graph")
def run_graph(settings, meter=None, *, full: bool = False) -> dict:
    """``paperkb graph``: PageRank, power-law fit and weights, CCBC related papers -> DuckDB.

    Replaces ``paper_metrics``, adds one ``powerlaw_fits`` row per run, and computes the related lists of every
    corpus paper (a full refresh: ``full``, or see :mod:`pipeline.steps.related_plan` for when) or of the papers the
    night changed and those whose turn it is, whose lists replace theirs (logged in ``_catalog_changes`` for the
    publish).
    """
    import pyarrow as pa

    from pipeline.warehouse import Warehouse

    meter = meter or StageTimer()
    with Warehouse(settings) as wh:
        wh.init()
        with wh.run("graph") as run:
            with meter.stage("pdf_citations"), wh.transaction():
                from pipeline.steps.pdf_citations import link_references

                pdf_links = link_references(wh.con, run.run_id)
            with meter.stage("load"):
                data = load_graph(wh.con)
            meter.keep("adjacency", data.a)
            n, m = data.n, data.a.nnz
            corpus = data.corpus_rows
            log.info("graph: %d works (%d corpus papers), %d citations", n, len(corpus), m)
            indeg = np.bincount(data.a.indices, minlength=n).astype(np.int64)
            outdeg = np.diff(data.a.indptr).astype(np.int64)
            previous = previous_run(wh.con, part_starts(settings, "related"))
            work_id_array = pa.array(data.work_ids, pa.string())
            moved = degrees_changed(wh.con, work_id_array, indeg, outdeg) if previous.top_k is not None else 2 * m
            change = change_share(moved, 2 * m)
            plan = plan_related(data.paper_ids, corpus, indeg, outdeg, previous, settings.graph_top_k,
                                settings.graph_related_refresh_runs, force_full=full, change=change,
                                refresh_change=settings.graph_related_refresh_change,
                                incoming_rows=settings.graph_related_incoming_rows)
            if plan.full:
                log.info("graph: related lists of all %d corpus papers (a full refresh: %s)", len(corpus), plan.reason)
            else:
                log.info("graph: the citation links changed by %.2f%% since the last run: related lists of %d new or "
                         "changed paper(s) and of %d in turn (every list before the links change by %g%%%s), of %d",
                         100 * change, plan.changed, len(plan.rows) - plan.changed,
                         100 * settings.graph_related_refresh_change,
                         "".join([f", and before {settings.graph_related_incoming_rows:,} newer entries name it"
                                  if settings.graph_related_incoming_rows else "",
                                  f", and at least every {settings.graph_related_refresh_runs} runs"
                                  if settings.graph_related_refresh_runs else ""]), len(corpus))
            # a large graph's PageRank runs in a child process while the fit and CCBC run here (pagerank.py)
            pr_job = PageRankJob(data.a, settings.graph_damping, settings.graph_pagerank_process_edges)
            try:
                if pr_job.in_process:
                    with meter.stage("pagerank"):
                        pr = pr_job.result()
                with meter.stage("fit"):
                    c = np.maximum(data.reported, indeg)
                    fit, fit_obj = fit_powerlaw(c, discrete=settings.graph_powerlaw_discrete,
                                                min_n=settings.graph_powerlaw_min_n, xmin=settings.graph_powerlaw_xmin)
                    w = survival_weights(c, fit_obj)
                with meter.stage("ccbc"), progress.task("graph: related papers (CCBC)", len(plan.rows), "papers") as bar:
                    rel = related_top_k(data.a, w, plan.rows, k=settings.graph_top_k,
                                        max_block_nnz=settings.graph_block_nnz, hub_citers=settings.graph_hub_citers,
                                        progress=bar.advance)
                if not pr_job.in_process:
                    with meter.stage("pagerank_wait"):  # what is left of the child's build and PageRank
                        pr = pr_job.result()
            finally:
                pr_job.close()
            with meter.stage("write"):
                work_ids = np.asarray(data.work_ids, dtype=object)
                paper_ids = np.asarray(data.paper_ids, dtype=object)
                metrics = pa.table({
                    "work_id": work_id_array,
                    "paper_id": pa.array(data.paper_ids, pa.string()),
                    "pagerank": pr,
                    "citation_count": c.astype(np.int32),
                    "in_degree": indeg.astype(np.int32),
                    "out_degree": outdeg.astype(np.int32),
                    "weight": w,
                    "run_id": pa.array([run.run_id] * n, pa.string()),
                })
                related = pa.table({
                    "paper_id": pa.array(paper_ids[rel.row].tolist(), pa.string()),
                    "rank": rel.rank,
                    "related_work_id": pa.array(work_ids[rel.col].tolist(), pa.string()),
                    "related_paper_id": pa.array(paper_ids[rel.col].tolist(), pa.string()),
                    "ccbc_weighted": rel.weighted,
                    "ccbc_naive": rel.naive,
                    "shared_references": rel.shared_refs,
                    "shared_citers": rel.shared_citers,
                    "cites": rel.cites,
                    "cited_by": rel.cited_by,
                    "run_id": pa.array([run.run_id] * len(rel), pa.string()),
                    "coupling": rel.coupling,
                })
                fit_row = fit.to_dict()
                with wh.transaction():
                    replace_rows(wh, "paper_metrics", "core/070_paper_metrics.sql", metrics)
                    if plan.full:
                        replace_rows(wh, "related", "core/072_related.sql", related)
                    else:
                        replace_lists(wh, plan.replace, related)
                    catalog_changes.record(wh.con, "related", None if plan.full else plan.replace)
                    incoming = incoming_table(rel, plan.changed_rows if plan.changed_rows is not None else
                                              np.zeros(0, np.int64), work_ids, paper_ids, run.run_id)
                    dropped = update_incoming(wh, incoming)
                    related_rows = (wh.con.execute("SELECT count(*) FROM related").fetchone() or (0,))[0]
                    cols = ["run_id", "created_at"] + list(fit_row)
                    wh.con.execute(
                        f"INSERT INTO powerlaw_fits ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [run.run_id, datetime.now(timezone.utc)] + list(fit_row.values()))
            run.count("in", n)
            run.count("edges", m)
            run.count("corpus_papers", len(corpus))
            run.count("out", n)
            run.count("related", len(rel))
            run.count("related_papers", len(plan.rows))
            run.count("related_changed", plan.changed)
            run.count("related_full", int(plan.full))
            run.count("related_top_k", settings.graph_top_k)
            run.count("degrees_changed", moved)  # over 2 * edges: the change (related_plan.change_share)
            run.count("related_owed_milli", round(1000 * plan.owed))  # the sweep's lists carried to the next run
            run.count("related_incoming", incoming.num_rows)
            run.count("related_incoming_dropped", dropped)
            run.count("rejected", 0)
    summary = {
        "run_id": run.run_id, "works": n, "citations": m, "corpus_papers": int(len(corpus)),
        "metrics": n, "related": int(related_rows), "related_written": int(len(rel)),
        "related_papers": int(len(plan.rows)), "related_changed": plan.changed, "related_full": plan.full,
        "links_changed": round(change, 6),  # related_plan.change_share: what moved the sweep
        "related_incoming": int(incoming.num_rows), "related_incoming_dropped": int(dropped),
        "powerlaw": fit.to_dict(), "pdf_citations": pdf_links,
        "seconds": dict(getattr(meter, "seconds", {})), "pagerank": pr_job.info,
    }
    pl = summary["powerlaw"]
    log.info("graph: %d works, %d citations, %d corpus papers -> %d related rows (%d written: %s); power law %s "
             "(xmin=%s, alpha=%s)", n, m, len(corpus), related_rows, len(rel),
             "a full refresh" if plan.full else f"{plan.changed} new or changed papers, {len(plan.rows) - plan.changed} due",
             pl["status"], pl["xmin"], None if pl["alpha"] is None else round(pl["alpha"], 3))
    return summary
