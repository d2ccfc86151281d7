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

Layout::

    ccbc.py     the adjacency matrix and the CCBC scores of blocks of rows (one sparse product each)
    related.py  related_top_k: the top k of each row, block by block, sparse or compiled (numba)
    weights.py  the power-law fit of citation counts and the survival weights
    tables.py   the graph loaded from DuckDB, what the runs before left, the lists written back
    run.py      run_graph, the step (PageRank runs in pipeline/steps/pagerank.py)
"""

from pipeline.steps.graph.ccbc import CCBC, TopRelated, adjacency, ccbc_scores
from pipeline.steps.graph.related import iter_blocks, related_top_k
from pipeline.steps.graph.run import StageTimer, run_graph
from pipeline.steps.graph.tables import CitationGraphData, load_graph
from pipeline.steps.graph.weights import PowerLawFit, fit_powerlaw, ks_xmin, survival_weights

__all__ = ["CCBC", "CitationGraphData", "PowerLawFit", "StageTimer", "TopRelated", "adjacency", "ccbc_scores",
           "fit_powerlaw", "iter_blocks", "ks_xmin", "load_graph", "related_top_k", "run_graph", "survival_weights"]
