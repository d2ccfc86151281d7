"""The citation-graph evidence as if one paper P did not exist: the leak-free recommendation benchmark.

In ``bench.recommend`` the hidden paper is one of P's references, so in the snapshot P co-cites it
with every positive: the stored CCBC leaks the answer. Here, for each seed set, the graph is rebuilt
without P -- P's row and column of the adjacency matrix dropped (its references and its citers), and
the reported citation count of each of P's references one lower, as an import of the corpus without P
gives -- and then ``pipeline.steps.graph`` computes exactly what ``paperkb graph`` stores: the counts
``c = max(reported, in-degree)``, the power-law fit and its survival weights ``w``, and the weighted
CCBC top-k (``related_top_k``, same ``k``, block size and hub threshold) of the seeds' rows. Weighted CCBC
is not a sum of per-citer terms (its parts are ratios, Jaccard indices and weights of the fitted power
law, which P's citations change too), so the seeds' rows are recomputed rather than patched; on CACM
that is a few milliseconds per set plus the power-law fit. ``tests/test_recommend_leak_free.py``
checks the result against a full ``import-collection`` + ``graph`` of CACM with P's record removed.

Also without P: the citation counts that the citation prior of ``recommend`` and of related papers
reads. Still from the snapshot: the paper vectors (P's own vector is never a candidate: P is dropped
from every list), the ``authors`` quality component of related papers (each author's citation total)
and the reasons' shared references and citers (they explain, they do not rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def graph_without(a: sp.csr_matrix, reported: np.ndarray, v: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """(adjacency, reported counts) with vertex ``v`` cut out: its row (what it cites) and column (who
    cites it) emptied, its references' reported counts one lower (not below 0) and its own 0. Pure."""
    a = sp.csr_matrix(a, copy=True)
    refs = a.indices[a.indptr[v]:a.indptr[v + 1]].copy()
    keep = np.ones(a.shape[0])
    keep[v] = 0.0
    d = sp.diags(keep)
    out = sp.csr_matrix(d @ a @ d)
    out.eliminate_zeros()
    out.sort_indices()
    rep = np.asarray(reported, dtype=np.int64).copy()
    rep[refs] = np.maximum(rep[refs] - 1, 0)
    rep[v] = 0
    return out, rep


def weights(a: sp.csr_matrix, reported: np.ndarray, settings) -> tuple[np.ndarray, np.ndarray]:
    """(counts, survival weights) as ``pipeline.steps.graph.run_graph`` computes them."""
    from pipeline.steps.graph import fit_powerlaw, survival_weights

    indeg = np.bincount(a.indices, minlength=a.shape[0]).astype(np.int64)
    c = np.maximum(reported, indeg)
    _, fit = fit_powerlaw(c, discrete=settings.graph_powerlaw_discrete, min_n=settings.graph_powerlaw_min_n,
                          xmin=settings.graph_powerlaw_xmin)
    return c, survival_weights(c, fit)


@dataclass
class LeakFreeEvidence:
    """What ``recommend`` and ``related_papers`` read from the graph, without P."""

    related: dict[str, list[dict]]  # seed -> rows as pipeline.query.related.graph_neighbours returns them
    citation_counts: dict[str, int]  # corpus paper -> citation count

    def recommend_edges(self) -> dict[str, dict[str, dict]]:
        """seed -> corpus paper -> row, as pipeline.query.recommend.related_edges returns them."""
        return {s: {r["paper_id"]: {k: r[k] for k in ("ccbc_weighted", "shared_references", "shared_citers", "cites", "cited_by")}
                    for r in rows if r["paper_id"] is not None} for s, rows in self.related.items()}


class LeakFreeGraph:
    """The snapshot's citation graph, loaded once, and the evidence of seeds without one paper."""

    def __init__(self, con, settings):
        from pipeline.steps.graph import load_graph

        self.settings = settings
        self.data = load_graph(con)
        self.vid = {p: i for i, p in enumerate(self.data.paper_ids) if p is not None}
        self.works = {w: (t, y) for w, t, y in con.execute("SELECT work_id, title, year FROM works").fetchall()}

    def evidence(self, paper: str | None, seeds: list[str]) -> LeakFreeEvidence:
        """The seeds' related rows and the citation counts without ``paper`` (None: the graph as stored,
        which must reproduce the snapshot's ``related`` rows: the benchmark checks that first)."""
        from pipeline.steps.graph import related_top_k

        s, d = self.settings, self.data
        if paper is None:
            a, reported = d.a, d.reported
        else:
            a, reported = graph_without(d.a, d.reported, self.vid[paper])
        c, w = weights(a, reported, s)
        rows = np.array([self.vid[x] for x in seeds if x in self.vid], dtype=np.int64)
        rel = related_top_k(a, w, rows, k=s.graph_top_k, max_block_nnz=s.graph_block_nnz, hub_citers=s.graph_hub_citers)
        out: dict[str, list[dict]] = {x: [] for x in seeds}
        for i in np.lexsort((rel.rank, rel.row)):  # per seed by rank, as the stored table is read
            wid = d.work_ids[rel.col[i]]
            title, year = self.works.get(wid, (None, None))
            out[d.paper_ids[rel.row[i]]].append({
                "work_id": wid, "paper_id": d.paper_ids[rel.col[i]], "ccbc_weighted": float(rel.weighted[i]),
                "ccbc_naive": float(rel.naive[i]), "shared_references": int(rel.shared_refs[i]),
                "shared_citers": int(rel.shared_citers[i]), "cites": bool(rel.cites[i]), "cited_by": bool(rel.cited_by[i]),
                "w_title": title, "w_year": year, "w_cc": int(reported[rel.col[i]])})
        counts = {p: int(c[v]) for p, v in self.vid.items() if p != paper}
        return LeakFreeEvidence(related=out, citation_counts=counts)
