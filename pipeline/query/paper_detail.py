"""Everything known of one corpus paper, from the catalog alone (no vectors, no model): what
``paperkb show`` prints and ``--json`` returns. Built on :mod:`pipeline.query.reading`."""

from __future__ import annotations

import math
from typing import Any

from pipeline.query import by_cited
from pipeline.query.reading import (cited_by, paper_facts, printed_entries, prior_and_derivative, references,
                                    work_cards)


def paper_detail(con, paper_id: str, *, top: int = 5) -> dict[str, Any]:
    """``{"paper", "facts", "metrics", "references", "cited_by", "figures"}`` of ``paper_id`` (any id the
    reading functions resolve; UnknownPaper otherwise). ``references`` and ``cited_by`` hold the ``top``
    most cited of each (``facts`` has their totals); ``metrics``: citation count, PageRank with its rank
    among the corpus papers, power-law weight."""
    facts = paper_facts(con, paper_id)
    pid = facts.paper_id
    cols = [d[0] for d in con.execute("SELECT * FROM papers LIMIT 0").description]
    row = con.execute("SELECT * FROM papers WHERE paper_id = ?", [pid]).fetchone()
    paper = {k: v for k, v in zip(cols, row) if k not in ("content_hash",)}
    metrics: dict[str, Any] = {"citation_count": paper.get("citation_count"), "pagerank": None, "weight": None,
                               "pagerank_rank": None, "ranked": None}
    m = con.execute("""
        WITH ranked AS (
            SELECT paper_id, pagerank, weight, citation_count,
                   rank() OVER (ORDER BY pagerank DESC) AS pagerank_rank, count(*) OVER () AS ranked
            FROM (SELECT paper_id, max(pagerank) AS pagerank, max(weight) AS weight,
                         max(citation_count) AS citation_count
                  FROM paper_metrics WHERE paper_id IS NOT NULL GROUP BY paper_id))
        SELECT pagerank, weight, citation_count, pagerank_rank, ranked FROM ranked WHERE paper_id = ?""",
                    [pid]).fetchone()
    if m is not None:
        pr, weight, cites, rank, ranked = m
        metrics.update(pagerank=None if pr is None or math.isnan(pr) else pr,
                       weight=None if weight is None or math.isnan(weight) else weight,
                       pagerank_rank=int(rank), ranked=int(ranked))
        if metrics["citation_count"] is None:
            metrics["citation_count"] = cites
    figures = [dict(zip(("label", "number", "page", "text"), r)) for r in con.execute(
        "SELECT label, number, page, text FROM figures WHERE paper_id = ? ORDER BY number, page", [pid]).fetchall()]
    refs = references(con, pid, limit=top, sort="citations").to_dict()["items"] if top else []
    citers = cited_by(con, pid, limit=top, sort="citations").to_dict()["items"] if top else []
    return {"paper": paper, "facts": facts.to_dict(), "metrics": metrics, "references": refs, "cited_by": citers,
            "figures": figures}


def work_detail(con, work_id: str, *, top: int = 5) -> dict[str, Any]:
    """``{"work", "references", "cited_by", "printed", "cited_with"}`` of a citation-graph work outside the corpus (a
    paper the corpus cites, known from a reference list or Semantic Scholar): its card (title, authors, year, links);
    the ``top`` most cited of the papers it cites and of those citing it, with their totals; how the citing papers'
    reference lists print it (``printed``: their entries, the most cited citer's first, with the total); and the
    works cited together with it (``cited_with``: cited by the most of its citing papers, at least two, as
    :func:`~pipeline.query.reading.prior_and_derivative` counts prior works)."""
    card = work_cards(con, [work_id])[work_id].to_dict()
    refs = references(con, work_id, limit=max(top, 1), sort="citations").to_dict()
    citers = cited_by(con, work_id, limit=max(top, 1), sort="citations").to_dict()
    printed_total, printed = printed_entries(con, work_id, limit=max(top, 1))
    citing = [r[0] for r in by_cited.execute(con, "SELECT DISTINCT citing_work_id FROM {cited_by} WHERE cited_work_id = ? "
                                                  "ORDER BY 1", [work_id]).fetchall()]
    together = prior_and_derivative(con, citing, limit=max(top, 1), exclude=[work_id]).prior if len(citing) > 1 else []
    return {"work": card, "references": {"total": refs["total"], "items": refs["items"][:top]},
            "cited_by": {"total": citers["total"], "items": citers["items"][:top]},
            "printed": {"total": printed_total, "items": [p.to_dict() for p in printed[:top]]},
            "cited_with": {"citing": len(citing), "items": [c.to_dict() for c in together[:top]]}}
