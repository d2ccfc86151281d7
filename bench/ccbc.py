"""The CCBC top-k stage of ``paperkb graph`` alone, on the graph ``bench.graph`` builds, without a warehouse.

``bench.graph`` names vertex v ``W<perm[v]>`` (zero-padded) and every work is a vertex, so the run's
vertex id (its rank by work_id) is ``perm[v]``: this builds the same CSR matrix, the same survival
weights (the power law fitted to in-degrees, as ``run_graph`` does when no count is reported) and the
same corpus rows in memory, then times ``related_top_k`` with the default settings. ``--code DIR``
imports ``pipeline`` from another checkout (an older commit) to compare old and new side by side;
``--save FILE.npz`` keeps the result to compare them field by field (``--compare A.npz B.npz``).

    python -m bench.ccbc --works 1000000 --corpus 60000 --edges 10000000 [--code /tmp/ccbc-old] [--save X.npz]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FIELDS = ("row", "rank", "col", "weighted", "naive", "shared_refs", "shared_citers", "cites", "cited_by")


def graph_arrays(n_works: int, n_corpus: int, n_edges: int, seed: int = 42, cache: Path | None = None):
    """(indptr, indices, n, corpus rows) of the benchmark graph, as ``run_graph`` would number it."""
    if cache is not None and cache.exists():
        z = np.load(cache)
        return z["indptr"], z["indices"], int(z["n"]), z["rows"]
    from bench.graph import synthetic_edges
    from pipeline.steps.graph import adjacency

    src, dst = synthetic_edges(n_works, n_corpus, n_edges, seed=seed)
    perm = np.random.default_rng(seed + 1).permutation(n_works)
    a = adjacency(perm[src], perm[dst], n_works)
    rows = np.sort(perm[:n_corpus]).astype(np.int64)
    if cache is not None:
        np.savez(cache, indptr=a.indptr, indices=a.indices, n=n_works, rows=rows)
    return a.indptr, a.indices, n_works, rows


def _peak_rss_gib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def compare(pa: Path, pb: Path) -> int:
    x, y = np.load(pa), np.load(pb)
    bad = [f for f in FIELDS if not (x[f].dtype == y[f].dtype and np.array_equal(x[f], y[f]))]
    print(json.dumps({"rows": int(len(x["row"])), "identical": not bad, "differ": bad}))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--works", type=int, default=1_000_000)
    ap.add_argument("--corpus", type=int, default=60_000)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--code", type=Path, default=None, help="import pipeline from this checkout")
    ap.add_argument("--save", type=Path, default=None, help="write the result to this .npz")
    ap.add_argument("--limit", type=int, default=None, help="only the first N corpus rows")
    ap.add_argument("--compare", type=Path, nargs=2, default=None, help="compare two saved results and exit")
    ap.add_argument("--threads", type=int, default=None, help="kernel threads (new code; default all CPUs)")
    ap.add_argument("--profile", type=Path, default=None, help="write a cProfile of the stage here")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    import scipy.sparse as sp

    from pipeline.settings import Settings
    from pipeline.steps import graph as G

    tag = f"{args.works}_{args.corpus}_{args.edges}_{args.seed}"
    cache = Path(tempfile.gettempdir()) / f"ccbc-graph-{tag}.npz"
    indptr, indices, n, rows = graph_arrays(args.works, args.corpus, args.edges, args.seed, cache)
    a = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))
    if args.limit:
        rows = rows[:args.limit]
    indeg = np.bincount(a.indices, minlength=n).astype(np.int64)
    s = Settings.load(warehouse=Path(tempfile.gettempdir()) / "ccbc-bench-unused")
    fit, obj = G.fit_powerlaw(indeg, discrete=s.graph_powerlaw_discrete, min_n=s.graph_powerlaw_min_n,
                              xmin=s.graph_powerlaw_xmin)
    w = G.survival_weights(indeg, obj)
    load = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    extra = {"threads": args.threads} if args.threads else {}
    rel = G.related_top_k(a, w, rows, k=s.graph_top_k, max_block_nnz=s.graph_block_nnz, hub_citers=s.graph_hub_citers,
                          **extra)
    if prof is not None:
        prof.disable()
        prof.dump_stats(str(args.profile))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"code": str(args.code or "this checkout"), "threads": args.threads, "works": n, "corpus": len(rows), "edges": int(a.nnz),
           "xmin": fit.xmin, "alpha": fit.alpha, "ccbc_wall_s": round(wall, 2), "ccbc_cpu_s": round(cpu, 2),
           "peak_rss_gib": round(_peak_rss_gib(), 2), "related_rows": len(rel),
           "load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out), flush=True)
    if args.save:
        np.savez(args.save, **{f: getattr(rel, f) for f in FIELDS})
    return 0


if __name__ == "__main__":
    sys.exit(main())
