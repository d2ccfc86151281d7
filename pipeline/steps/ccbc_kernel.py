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
def _emit(i, a, sel, ns, no, inv, acc, w, hubs, h_ptr, h_idx, o_row, o_col, o_sw, o_pk, o_hw, o_hn):
    """Write row ``i``'s picks ``sel[:ns]`` at ``no``, with their hub shares (CCBC.hub_shares) when ``hubs``."""
    for t in range(ns):
        p = sel[t]
        b = inv[p]
        o_row[no + t] = i
        o_col[no + t] = b
        o_sw[no + t] = acc[p, 0]
        o_pk[no + t] = np.int64(acc[p, 1])
        hw = 0.0
        hn = 0
        if hubs:  # shared hub references, in increasing id
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
        o_hw[no + t] = hw
        o_hn[no + t] = hn


@nb.njit(nogil=True, cache=True)
def _sift_down(h, i, n):
    """Restore the min-heap ``h[:n]`` below position ``i``."""
    while True:
        l = 2 * i + 1
        if l >= n:
            return
        j = l
        if l + 1 < n and h[l + 1] < h[l]:
            j = l + 1
        if h[j] < h[i]:
            h[i], h[j] = h[j], h[i]
            i = j
        else:
            return


@nb.njit(nogil=True, cache=True)
def _kth_largest(vals, m, kk, h):
    """The kk-th largest of ``vals[:m]`` (counting repeats; m >= kk): the value ``np.partition`` puts at
    ``m - kk``, with a min-heap of the kk largest so far (O(m) when most values are small, as here)."""
    for t in range(kk):
        h[t] = vals[t]
    for i in range(kk // 2 - 1, -1, -1):
        _sift_down(h, i, kk)
    for t in range(kk, m):
        v = vals[t]
        if v > h[0]:
            h[0] = v
            _sift_down(h, 0, kk)
    return h[0]


@nb.njit(nogil=True, cache=True)
def top_candidates(rows, slack, k, light, hubs,
                   a_ptr, a_idx, a_idx_p, at_ptr, at_idx, at_idx_p, heavy, inv,
                   w, wref, indeg, attr, h_ptr, h_idx,
                   acc, touched, vals, sel, o_row, o_col, o_sw, o_pk, o_hw, o_hn, full):
    """Candidates of ``rows`` (see the module docstring).

    Vertices are accumulator slots ``p`` (``inv[p]`` is the vertex; ``a_idx_p``/``at_idx_p`` are ``a_idx``/``at_idx``
    as slots); ``attr[p]`` = (w, wref, indeg) of slot p, side by side so one cache line serves a score.
    ``slack[i] > 0`` only in light mode. ``acc[p]`` = (shared_w, packed as a float: exact below 2**53), zeros,
    and ``touched``/``vals``/``sel`` (scratch, one per vertex) are this thread's workspace; ``acc`` is left
    zeroed. Writes each pick's local row index, column, shared_w, packed, hub w and hub count (the last two
    zero unless ``hubs``) to the ``o_*`` buffers, and ``full[i]`` (the row needs a full recomputation; no
    picks for it). Returns (rows done, picks written, picks of the row that did not fit): rows stop at the
    first whose picks overflow the buffers (no array is reallocated in here: that slows every loop down)."""
    nr = len(rows)
    cap = len(o_row)
    no = 0
    heap = np.empty(k + 1, dtype=np.float64)
    one_ref = 1.0
    one_cit = float(2**_CIT_SHIFT)
    cites_bit = float(2**_CITES_BIT)
    cited_bit = float(2**_CITED_BIT)
    for i in range(nr):
        a = rows[i]
        m = 0
        # references r of a, in increasing id: (a, r) is a direct link; the citers of r share r with a
        for jj in range(a_ptr[a], a_ptr[a + 1]):
            r = a_idx[jj]
            p = a_idx_p[jj]
            if acc[p, 1] == 0:
                touched[m] = p
                m += 1
            acc[p, 1] += cites_bit
            if light and heavy[r]:
                continue
            wr = w[r]
            for kk in range(at_ptr[r], at_ptr[r + 1]):
                q = at_idx_p[kk]
                if acc[q, 1] == 0:
                    touched[m] = q
                    m += 1
                acc[q, 0] += wr
                acc[q, 1] += one_ref
        # citers c of a: (a, c) is a direct link; the references of c share the citer c with a
        for jj in range(at_ptr[a], at_ptr[a + 1]):
            p = at_idx_p[jj]
            if acc[p, 1] == 0:
                touched[m] = p
                m += 1
            acc[p, 1] += cited_bit
        for jj in range(at_ptr[a], at_ptr[a + 1]):
            c = at_idx[jj]
            for kk in range(a_ptr[c], a_ptr[c + 1]):
                q = a_idx_p[kk]
                if acc[q, 1] == 0:
                    touched[m] = q
                    m += 1
                acc[q, 1] += one_cit
        # the score of CCBC.block, operation by operation
        wa, wrefa, indega = w[a], wref[a], indeg[a]
        for t in range(m):
            p = touched[t]
            sw = acc[p, 0]
            pk = np.int64(acc[p, 1])
            wb, wrefb, indegb = attr[p, 0], attr[p, 1], attr[p, 2]
            den = wrefa
            den += wrefb
            den -= sw
            den = max(den, 1e-300)
            v = sw / den
            v /= 3.0
            if pk >= 2**_CIT_SHIFT:
                sc = np.float64((pk >> _CIT_SHIFT) & _CIT_MASK)
                v += wa * wb * (sc / max(indega + indegb - sc, 1e-300)) / 3.0
                if pk >= 2**_CITES_BIT:
                    bits = pk >> _CITES_BIT
                    v += ((bits & 1) * wb + ((bits >> 1) & 1) * wa) / 6.0
            vals[t] = v
        # the threshold and the picks of _top_candidates
        sk = slack[i] if light else 0.0
        thr = -np.inf
        if m > k + 1:
            thr = _kth_largest(vals, m, k + 1, heap)
        if sk > 0 and sk >= thr:
            full[i] = True
        else:
            lim = thr - sk
            ns = 0
            for t in range(m):
                if thr == -np.inf or vals[t] >= lim:
                    sel[ns] = touched[t]
                    ns += 1
            if no + ns > cap:  # the buffers are full: the caller comes back for row i with larger ones
                for t in range(m):
                    p = touched[t]
                    acc[p, 0] = 0.0
                    acc[p, 1] = 0.0
                return i, no, ns
            _emit(i, a, sel, ns, no, inv, acc, w, hubs, h_ptr, h_idx, o_row, o_col, o_sw, o_pk, o_hw, o_hn)
            no += ns
        for t in range(m):
            p = touched[t]
            acc[p, 0] = 0.0
            acc[p, 1] = 0.0
    return nr, no, 0
