"""Stored related-list entries scored with the snapshot's current graph (re-ranking at read).

A related list is computed by one graph run and kept until its turn comes again, before the citation links change
by ``graph_related_refresh_change`` since (docs/graph.md). Three of weighted CCBC's four terms
(sql/core/072_related.sql) depend on the two works' power-law weights ``w`` and in-degrees, which every graph run
moves and publishes for every work in ``paper_metrics``; the fourth, bibliographic coupling (the weights of the
references both cite), is stored with each entry as ``coupling``. A reader re-scores an entry of paper ``a`` naming
work ``b`` with today's values::

    ccbc_weighted = coupling + 1/6 w(a) [b cites a] + 1/6 w(b) [a cites b] + 1/3 w(a) w(b) sc / (in(a) + in(b) - sc)

keeping the coupling term and the shared citers ``sc`` from the run that computed the entry. The same graph gives the
stored score back; a list computed days ago is ranked as today's graph weighs its candidates. Measured with
``bench.related_staleness`` (BENCHMARKS.md): recall@10 against the exact lists rises from 0.981 to 0.985 on CACM and
from 0.955 to 0.993 on the synthetic graph at the weekly cycle.

An entry is kept as stored when it has no ``coupling`` (computed before the column existed, or a snapshot published
before it) or when a work is missing from ``paper_metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable

Metrics = tuple[float, int]  # (power-law weight, in-degree) of a work in the snapshot's graph


def score(coupling: float, shared_citers: int, cites: bool, cited_by: bool, a: Metrics, b: Metrics) -> float:
    """Weighted CCBC of the pair (``a``, ``b``) from its stored ``coupling`` term and shared citers and the two works'
    current (weight, in-degree); ``cites``: ``a`` cites ``b``; ``cited_by``: ``b`` cites ``a``."""
    (wa, ia), (wb, ib) = a, b
    union = ia + ib - shared_citers
    jaccard = shared_citers / union if union > 0 else 0.0
    return coupling + (wa * bool(cited_by) + wb * bool(cites)) / 6.0 + wa * wb * jaccard / 3.0


def current_metrics(con, paper_ids: Iterable[str], work_ids: Iterable[str]) -> tuple[dict[str, Metrics], dict[str, Metrics]]:
    """(paper -> metrics of its work, work -> metrics) from the snapshot's ``paper_metrics`` for ``paper_ids`` and
    ``work_ids`` (two queries, each with a list of constants that the Parquet scan filters on). A paper that several
    works map to (a data error) takes its best-ranked work's, as the view ``paper_ranks`` does."""
    papers, works = sorted(set(paper_ids)), sorted(set(work_ids))
    by_paper: dict[str, Metrics] = {}
    by_work: dict[str, Metrics] = {}
    for column, ids, into in (("paper_id", papers, by_paper), ("work_id", works, by_work)):
        if ids:
            rows = con.execute(f"SELECT {column}, weight, in_degree FROM paper_metrics "
                               f"WHERE {column} IN ({', '.join('?' * len(ids))}) ORDER BY pagerank NULLS FIRST",
                               ids).fetchall()  # (the best-ranked last: it stays)
            into.update((k, (float(w), int(d))) for k, w, d in rows if w is not None and d is not None)
    return by_paper, by_work


def rescore(con, entries: list[tuple[str, dict]]) -> int:
    """Re-score ``entries`` in place: (the paper whose list it is, the entry: a dict with ``work_id`` (the related
    work), ``ccbc_weighted``, ``coupling``, ``shared_citers``, ``cites`` and ``cited_by``, seen from that paper).
    ``ccbc_weighted`` becomes the score with the snapshot's weights and in-degrees (:func:`score`) where both works'
    are known and the entry has its coupling term. Returns how many were re-scored."""
    todo = [(a, e) for a, e in entries if e.get("coupling") is not None]
    if not todo:
        return 0
    by_paper, by_work = current_metrics(con, (a for a, _ in todo), (e["work_id"] for _, e in todo))
    done = 0
    for a, e in todo:
        ma, mb = by_paper.get(a), by_work.get(e["work_id"])
        if ma is not None and mb is not None:
            e["ccbc_weighted"] = score(float(e["coupling"]), int(e["shared_citers"] or 0), bool(e["cites"]),
                                       bool(e["cited_by"]), ma, mb)
            done += 1
    return done
