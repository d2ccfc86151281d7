"""Related papers ("connected papers") for one paper.

1. Graph evidence: the snapshot's ``related`` table (catalog.duckdb): weighted co-citation /
   bibliographic coupling (``ccbc_weighted``, power-law survival weights; each entry scored with the snapshot's
   current weights and in-degrees, :mod:`pipeline.query.ccbc_now`) and the naive count.
2. Semantic evidence: cosine between the paper's doc vector and the other papers' doc vectors
   (LanceDB vector search on ``papers``).
3. ``fused = (1 - a) * ccbc_weighted / max + a * max(0, cosine)``, a = ``query_related_semantic_weight``.
4. Confidence quality, each component in [0, 1] and shown: ``citations`` (log citation count over
   the candidates' best), ``velocity`` (citations per year since publication, log, over the best),
   ``authors`` (the authors' record: log of their papers' total citations in the catalog, over the
   best), ``recency`` (exp(-(newest year in the snapshot - year) / 10)). ``quality`` is their mean
   over the components known for that paper.
5. ``score = (1 - b) * fused + b * quality``, b = ``query_related_quality_weight``.

All catalog queries take the paper id as a bound parameter.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from pipeline.query.results import Related

log = logging.getLogger(__name__)

# what a reader needs of an entry to score it with the current graph (pipeline.query.ccbc_now), beside its score
PARTS = ("coupling", "shared_citers", "cites", "cited_by")
INCOMING_COLUMNS = ("work_id", "paper_id", "ccbc_weighted", "ccbc_naive", "shared_references", *PARTS)


def graph_neighbours(con, paper_id: str) -> list[dict]:
    """Rows of ``related`` for this paper, with the related work's title/year/citations (the mart
    ``related_works``), and the entries of the lists computed after its own that name it (:func:`newer_entries`),
    each scored with the snapshot's current weights and in-degrees (:mod:`pipeline.query.ccbc_now`), strongest
    first."""
    from pipeline.query.ccbc_now import rescore

    cur = con.execute("SELECT * FROM related_works WHERE paper_id = ? ORDER BY rank", [paper_id])
    names = [d[0] for d in cur.description]
    rows: dict[str, dict] = {}
    for values in cur.fetchall():
        r = dict(zip(names, values))
        rows[r["related_work_id"]] = {
            "work_id": r["related_work_id"], "paper_id": r["related_paper_id"], "ccbc_weighted": r["ccbc_weighted"],
            "ccbc_naive": r["ccbc_naive"], "w_title": r["work_title"], "w_year": r["work_year"],
            "w_cc": r["work_citation_count"], **{k: r.get(k) for k in PARTS}}
    for row in newer_entries(con, paper_id):  # a later graph's score of the pair replaces the stored one (the newest last)
        rows[row["work_id"]] = {**rows.get(row["work_id"], {"w_title": None, "w_year": None, "w_cc": None}), **row}
    rescore(con, [(paper_id, r) for r in rows.values()])
    return sorted(rows.values(), key=lambda r: -float(r["ccbc_weighted"] or 0))


def newer_entries(con, paper_id: str) -> list[dict]:
    """The entries that name ``paper_id`` in the lists of new and changed papers computed after its own list
    (``related_incoming``, sql/core/075_related_incoming.sql): weighted CCBC is symmetric, so each scores the pair
    for a later graph, and a new paper enters an older list the night it arrives instead of when that list's turn
    comes. Oldest first, scores as stored; [] for a snapshot published before that table."""
    keep = ("work_id", "paper_id", "ccbc_weighted", "ccbc_naive", *PARTS)
    return [{k: e.get(k) for k in keep} for e in newer_entries_of(con, [paper_id]).get(paper_id, [])]


def newer_entries_of(con, paper_ids: list[str]) -> dict[str, list[dict]]:
    """:func:`newer_entries` of each of ``paper_ids`` (paper -> its entries, oldest run first; ``cites``: the named
    paper cites the entry's paper, as in its own list; ``coupling`` None in a snapshot published before it), in two
    queries. Read by key range (the key is the run, then the paper named): from the run of the oldest of their lists
    on."""
    import duckdb

    if not paper_ids:
        return {}
    ids = sorted(set(paper_ids))
    among = f"({', '.join('?' * len(ids))})"  # a list of constants: pushed into the Parquet scans as a filter
    try:
        runs = dict(con.execute(f"SELECT paper_id, min(run_id) FROM related WHERE paper_id IN {among} GROUP BY 1",
                                ids).fetchall())
        oldest = min(runs.get(p) or "" for p in ids)
        # keys of later runs sort after every key of this run ("/" < "0"): the key range skips older runs' files
        cur = con.execute(
            f"SELECT * FROM related_incoming WHERE entry_key > ? AND run_id > ? AND related_paper_id IN {among} "
            "ORDER BY run_id", [oldest + "0", oldest, *ids])
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    except duckdb.CatalogException:  # a snapshot without related_incoming
        return {}
    out: dict[str, list[dict]] = {}
    for r in rows:
        named = r["related_paper_id"]
        if r["run_id"] > (runs.get(named) or ""):
            out.setdefault(named, []).append({k: r.get(k) for k in INCOMING_COLUMNS})
    return out


def edges_among(con, paper_ids: list[str]) -> list[tuple[str, str, float]]:
    """(paper, related paper, ccbc_weighted) for the ``related`` pairs among ``paper_ids``, both directions
    (a pair may be in one paper's top list only): the links between a paper's drawn related papers, scored with the
    snapshot's current weights and in-degrees (:mod:`pipeline.query.ccbc_now`)."""
    from pipeline.query.ccbc_now import rescore

    if not paper_ids:
        return []
    cur = con.execute(
        "SELECT * FROM related "
        "WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND related_paper_id IN (SELECT unnest(?::VARCHAR[]))",
        [paper_ids, paper_ids])
    names = [d[0] for d in cur.description]
    rows = [{**dict(zip(names, r)), "work_id": r[names.index("related_work_id")]} for r in cur.fetchall()]
    rescore(con, [(r["paper_id"], r) for r in rows])
    return [(r["paper_id"], r["related_paper_id"], float(r["ccbc_weighted"] or 0.0)) for r in rows]


def author_records(con, paper_ids: list[str]) -> dict[str, float]:
    """paper_id -> mean over its authors of their total citations across the catalog's papers."""
    if not paper_ids:
        return {}
    # the records of these papers' authors only (every author's total was aggregated per call: 95 ms at 100,000
    # papers, now 48 ms, the same values)
    sql = """
        WITH mine AS (SELECT paper_id, COALESCE(author_id, name) AS who FROM paper_authors
                      WHERE paper_id = ANY(?::VARCHAR[])),
        rec AS (
            SELECT COALESCE(pa.author_id, pa.name) AS who, SUM(COALESCE(m.citation_count, p.citation_count, 0)) AS cites
            FROM paper_authors pa JOIN papers p ON p.paper_id = pa.paper_id
            LEFT JOIN paper_metrics m ON m.paper_id = p.paper_id
            WHERE COALESCE(pa.author_id, pa.name) IN (SELECT who FROM mine)
            GROUP BY 1)
        SELECT mine.paper_id, AVG(rec.cites) FROM mine JOIN rec USING (who) GROUP BY 1"""
    return {pid: float(v or 0) for pid, v in con.execute(sql, [paper_ids]).fetchall()}


def _citation_counts(con, paper_ids: list[str]) -> dict[str, int]:
    """Citation counts of corpus papers from the graph metrics."""
    if not paper_ids:
        return {}
    rows = con.execute("SELECT paper_id, citation_count FROM paper_metrics WHERE paper_id IN (SELECT UNNEST(?::VARCHAR[]))",
                       [paper_ids]).fetchall()
    return {pid: int(c) for pid, c in rows if c is not None}


def _log_norm(values: dict[str, float]) -> dict[str, float]:
    top = max((math.log1p(max(v, 0.0)) for v in values.values()), default=0.0)
    return {k: (math.log1p(max(v, 0.0)) / top if top > 0 else 0.0) for k, v in values.items()}


def related_papers(searcher, paper_id: str, k: int = 20, *, graph: list[dict] | None = None,
                   citation_counts: dict[str, int] | None = None) -> list[Related]:
    """The ``k`` best related papers of ``paper_id`` (see the module doc). ``graph`` (rows as
    :func:`graph_neighbours` returns them) and ``citation_counts`` (corpus paper -> count) replace the
    snapshot's where given: the recommendation benchmark's leak-free mode passes them computed without the
    citing paper (the ``authors`` quality component still reads the snapshot)."""
    s = searcher.settings
    a, b = s.query_related_semantic_weight, s.query_related_quality_weight
    if not isinstance(k, int) or k < 1 or k > 1000:
        from pipeline.errors import UserError

        raise UserError(f"k must be between 1 and 1000, got {k!r}")
    meta = searcher.meta
    searcher.paper_row[paper_id]  # KeyError for a paper the snapshot lacks (callers check first)

    # graph evidence
    con = None
    if searcher.snap.catalog_path.is_file():
        con = searcher.snap.catalog()
    if graph is None:
        graph = graph_neighbours(con, paper_id) if con is not None else []

    # semantic evidence: nearest doc vectors
    doc_v, abs_v = searcher.paper_vectors([paper_id])
    qv = doc_v[0] if np.linalg.norm(doc_v[0]) > 0 else abs_v[0]
    semantic: dict[str, float] = {}
    if np.linalg.norm(qv) > 0:
        vec_col = "doc_vector" if np.linalg.norm(doc_v[0]) > 0 else "abs_vector"
        hits = searcher.papers.search(qv, vector_column_name=vec_col).select(["paper_id", vec_col, "_distance"]).limit(3 * k + 1).to_arrow()
        from pipeline.query.resident import vector_matrix
        from pipeline.vectors import l2_normalise

        vecs = vector_matrix(hits[vec_col], searcher.dim)

        cos = l2_normalise(vecs) @ l2_normalise(qv)[0]
        for pid, c in zip(hits["paper_id"].to_pylist(), cos):
            if pid != paper_id:
                semantic[pid] = float(c)

    # candidates keyed by paper id when the work is in the corpus, else by work id
    cands: dict[str, dict] = {}
    for g in graph:
        key = g["paper_id"] or g["work_id"]
        cands[key] = {"paper_id": g["paper_id"], "work_id": g["work_id"], "ccbc_weighted": float(g["ccbc_weighted"] or 0),
                      "ccbc_naive": float(g["ccbc_naive"] or 0), "title": g["w_title"], "year": g["w_year"], "cc": g["w_cc"]}
    for pid, c in semantic.items():
        cands.setdefault(pid, {"paper_id": pid, "work_id": None, "ccbc_weighted": 0.0, "ccbc_naive": 0.0,
                               "title": None, "year": None, "cc": None})["semantic"] = c
    cands.pop(paper_id, None)
    if not cands:
        if con is not None:
            con.close()
        return []

    # fill corpus papers' metadata from the snapshot
    corpus = [c["paper_id"] for c in cands.values() if c["paper_id"] in searcher.paper_row]
    for c in cands.values():
        pid = c["paper_id"]
        if pid in searcher.paper_row:
            m = meta.slice(searcher.paper_row[pid], 1).to_pylist()[0]
            c["title"] = c["title"] or m.get("title")
            c["year"] = c["year"] or m.get("year")
            c["external_id"] = m.get("external_id")
            if c["cc"] is None:
                c["cc"] = m.get("citation_count")
            if "semantic" not in c:  # a graph neighbour outside the top semantic hits: compute its cosine
                c["semantic"] = None
    missing = [c["paper_id"] for c in cands.values() if c.get("semantic") is None and c["paper_id"] in searcher.paper_row]
    if missing and np.linalg.norm(qv) > 0:
        dv, av = searcher.paper_vectors(missing)
        from pipeline.vectors import l2_normalise

        cos = l2_normalise(np.where(np.linalg.norm(dv, axis=1, keepdims=True) > 0, dv, av)) @ l2_normalise(qv)[0]
        for pid, cval in zip(missing, cos):
            cands[pid]["semantic"] = float(cval)
    authors: dict[str, float] = {}
    counts = citation_counts if citation_counts is not None else (_citation_counts(con, corpus) if con is not None else {})
    for pid, n in counts.items():
        if pid in cands and pid in searcher.paper_row:
            cands[pid]["cc"] = n
    if con is not None:
        authors = author_records(con, corpus)
        con.close()

    years = [y for y in meta["year"].to_pylist() if y is not None]
    newest = max(years) if years else None
    ccbc_top = max((c["ccbc_weighted"] for c in cands.values()), default=0.0)
    cit = _log_norm({key: float(c["cc"]) for key, c in cands.items() if c["cc"] is not None})
    vel_raw = {key: float(c["cc"]) / max(1, (newest or c["year"]) - c["year"] + 1)
               for key, c in cands.items() if c["cc"] is not None and c["year"] is not None}
    vel = _log_norm(vel_raw)
    auth = _log_norm({key: authors[c["paper_id"]] for key, c in cands.items() if c["paper_id"] in authors})

    out: list[Related] = []
    for key, c in cands.items():
        ccbc_n = c["ccbc_weighted"] / ccbc_top if ccbc_top > 0 else 0.0
        sem = max(0.0, c.get("semantic") or 0.0)
        fused = (1 - a) * ccbc_n + a * sem
        comp = {}
        if key in cit:
            comp["citations"] = cit[key]
        if key in vel:
            comp["velocity"] = vel[key]
        if key in auth:
            comp["authors"] = auth[key]
        if c["year"] is not None and newest is not None:
            comp["recency"] = math.exp(-max(0, newest - c["year"]) / 10.0)
        quality = sum(comp.values()) / len(comp) if comp else 0.0
        out.append(Related(paper_id=c["paper_id"], work_id=c["work_id"] or c["paper_id"], title=c["title"], year=c["year"],
                           citation_count=c["cc"], ccbc_weighted=c["ccbc_weighted"], ccbc_naive=c["ccbc_naive"],
                           semantic=float(c.get("semantic") or 0.0), fused=fused, quality=quality, components=comp,
                           score=(1 - b) * fused + b * quality, external_id=c.get("external_id")))
    out.sort(key=lambda r: (-r.score, str(r.paper_id or r.work_id)))
    for i, r in enumerate(out[:k], start=1):
        r.rank = i
    return out[:k]
