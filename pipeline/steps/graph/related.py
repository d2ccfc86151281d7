"""The top-k related works of each corpus paper by weighted CCBC (``related_top_k``): blocks of rows bounded in memory,
hub references handled by a slack, candidates found by the sparse product or by the compiled pass
(pipeline/steps/ccbc_kernel.py), with bit-identical results."""

from __future__ import annotations

import os
import queue
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from pipeline.steps.graph.ccbc import CCBC, TopRelated


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
