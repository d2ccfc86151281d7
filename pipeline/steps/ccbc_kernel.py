"""CCBC candidates of a block of rows in one compiled pass, without the sparse product (numba).

``pipeline.steps.graph.CCBC.block`` builds every pair (row, b) sharing a reference, a citer or a direct link
as one SciPy product, then scores all of them with NumPy, then ``_top_candidates`` keeps the few per row that
can reach the top k. At 6M works that is billions of pairs written to memory and read back several times.
``top_candidates`` below does the same per row with a dense accumulator (sparse accumulator, "SPA"): it walks
the row's references (their citers) and citers (their references), accumulates the same channels, scores
each touched b with the same floating-point operations in the same order, picks the same candidates with
the same threshold, and only then writes anything. Results are bit-for-bit those of the product path
(tests/test_graph.py compares them on random, hub-heavy and tied graphs):

- ``shared_w`` is summed over shared references in increasing vertex id, as ``csr_matmat`` sums it (the
  product walks the row's references in column order; its other channels add exact zeros to the real part);
- the integer channels are packed as in ``CCBC`` (``shared_refs + 2**20 shared_citers + 2**50 cites + 2**51
  cited_by``) and are exact in any order;
- the score of a pair and the threshold are computed by the expressions of ``CCBC.block`` and
  ``_top_candidates``, operation by operation (IEEE arithmetic without contraction: numba's default);
- hub shares (``CCBC.hub_shares``) are summed over the shared hub references in increasing vertex id, as
  ``csr_matvec`` sums them.

The accumulator is indexed by a relabelling of the vertices by decreasing degree (``pos``): the works that
get touched most (corpus papers, which cite and are cited) share a small, cache-resident stretch of it.
Each call is ``nogil``, so blocks are split over threads.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_CIT_SHIFT, _CITES_BIT, _CITED_BIT = 20, 50, 51
_CIT_MASK = 2 ** (_CITES_BIT - _CIT_SHIFT) - 1


@nb.njit(nogil=True, cache=True)
def _grow(x, n):
    y = np.empty(max(n, 2 * len(x)), dtype=x.dtype)
    y[:len(x)] = x
    return y


@nb.njit(nogil=True, cache=True)
def top_candidates(rows, slack, k, light, hubs,
                   a_ptr, a_idx, a_idx_p, at_ptr, at_idx, at_idx_p, heavy, inv,
                   w, wref, indeg, w_p, wref_p, indeg_p, h_ptr, h_idx,
                   acc_w, acc_pk, touched, vals):
    """Candidates of ``rows`` (see the module docstring).

    ``slack[i] > 0`` only in light mode. ``acc_w``/``acc_pk`` (zeros, one per vertex) and ``touched``/``vals``
    (scratch, one per vertex) are this thread's workspace; they are left zeroed. Returns (local row index,
    column, shared_w, packed, hub w, hub count, full) - the last two zero unless ``hubs``; ``full[i]``: the
    row needs a full recomputation (no candidates returned for it)."""
    nr = len(rows)
    cap = nr * (k + 2) + 16
    o_row = np.empty(cap, dtype=np.int64)
    o_col = np.empty(cap, dtype=np.int64)
    o_sw = np.empty(cap, dtype=np.float64)
    o_pk = np.empty(cap, dtype=np.int64)
    o_hw = np.zeros(cap, dtype=np.float64)
    o_hn = np.zeros(cap, dtype=np.int64)
    full = np.zeros(nr, dtype=np.bool_)
    no = 0
    one_ref = np.int64(1)
    one_cit = np.int64(1) << _CIT_SHIFT
    cites_bit = np.int64(1) << _CITES_BIT
    cited_bit = np.int64(1) << _CITED_BIT
    for i in range(nr):
        a = rows[i]
        m = 0
        # references r of a, in increasing id: (a, r) is a direct link; the citers of r share r with a
        for jj in range(a_ptr[a], a_ptr[a + 1]):
            r = a_idx[jj]
            p = a_idx_p[jj]
            if acc_pk[p] == 0:
                touched[m] = p
                m += 1
            acc_pk[p] += cites_bit
            if light and heavy[r]:
                continue
            wr = w[r]
            for kk in range(at_ptr[r], at_ptr[r + 1]):
                q = at_idx_p[kk]
                if acc_pk[q] == 0:
                    touched[m] = q
                    m += 1
                acc_w[q] += wr
                acc_pk[q] += one_ref
        # citers c of a: (a, c) is a direct link; the references of c share the citer c with a
        for jj in range(at_ptr[a], at_ptr[a + 1]):
            p = at_idx_p[jj]
            if acc_pk[p] == 0:
                touched[m] = p
                m += 1
            acc_pk[p] += cited_bit
        for jj in range(at_ptr[a], at_ptr[a + 1]):
            c = at_idx[jj]
            for kk in range(a_ptr[c], a_ptr[c + 1]):
                q = a_idx_p[kk]
                if acc_pk[q] == 0:
                    touched[m] = q
                    m += 1
                acc_pk[q] += one_cit
        # the score of CCBC.block, operation by operation
        wa, wrefa, indega = w[a], wref[a], indeg[a]
        for t in range(m):
            p = touched[t]
            sw = acc_w[p]
            pk = acc_pk[p]
            den = wrefa
            den += wref_p[p]
            den -= sw
            den = max(den, 1e-300)
            v = sw / den
            v /= 3.0
            if pk >= one_cit:
                sc = np.float64((pk >> _CIT_SHIFT) & _CIT_MASK)
                v += wa * w_p[p] * (sc / max(indega + indeg_p[p] - sc, 1e-300)) / 3.0
                if pk >= cites_bit:
                    bits = pk >> _CITES_BIT
                    v += ((bits & 1) * w_p[p] + ((bits >> 1) & 1) * wa) / 6.0
            vals[t] = v
        # the threshold and the picks of _top_candidates
        sk = slack[i] if light else 0.0
        thr = -np.inf
        if m > k + 1:
            thr = np.partition(vals[:m], m - (k + 1))[m - (k + 1)]
        if sk > 0 and sk >= thr:
            full[i] = True
        else:
            lim = thr - sk
            for t in range(m):
                if thr == -np.inf or vals[t] >= lim:
                    if no == len(o_row):
                        o_row = _grow(o_row, no + 1)
                        o_col = _grow(o_col, no + 1)
                        o_sw = _grow(o_sw, no + 1)
                        o_pk = _grow(o_pk, no + 1)
                        o_hw = _grow(o_hw, no + 1)
                        o_hn = _grow(o_hn, no + 1)
                    p = touched[t]
                    b = inv[p]
                    o_row[no] = i
                    o_col[no] = b
                    o_sw[no] = acc_w[p]
                    o_pk[no] = acc_pk[p]
                    hw = 0.0
                    hn = 0
                    if hubs:  # shared hub references, in increasing id (CCBC.hub_shares)
                        x, xe = h_ptr[a], h_ptr[a + 1]
                        y, ye = h_ptr[b], h_ptr[b + 1]
                        while x < xe and y < ye:
                            hx, hy = h_idx[x], h_idx[y]
                            if hx == hy:
                                hw += w[hx]
                                hn += 1
                                x += 1
                                y += 1
                            elif hx < hy:
                                x += 1
                            else:
                                y += 1
                    o_hw[no] = hw
                    o_hn[no] = hn
                    no += 1
        for t in range(m):
            p = touched[t]
            acc_w[p] = 0.0
            acc_pk[p] = 0
    return o_row[:no], o_col[:no], o_sw[:no], o_pk[:no], o_hw[:no], o_hn[:no], full
