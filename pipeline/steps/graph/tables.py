"""The warehouse side of the graph step: the citation graph loaded from DuckDB as arrays, what the runs before left
(degrees, lists, run_log), and the related lists, metrics and incoming entries written back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline import catalog_changes
from pipeline.steps.graph.ccbc import TopRelated, adjacency
from pipeline.steps.related_plan import Previous, change_share


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
