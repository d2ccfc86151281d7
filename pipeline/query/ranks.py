"""Per-paper values that a night moves for many papers at once: citation counts, PageRank, weights.

They live in the catalog (the ``paper_ranks`` view, ``sql/marts/094_paper_ranks.sql``), not in the LanceDB
``papers`` rows that hold the vectors: a night's graph run moves most PageRank values, and a row that changes
is rewritten whole, vectors included. Readers take them from here, aligned to the papers table's row order.
Snapshots published before (schema version 1) carry them in the LanceDB rows: those are read as they are.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

RANK_COLUMNS = {"citation_count": pa.int64(), "pagerank": pa.float64(), "weight": pa.float64()}


def read(con) -> pa.Table | None:
    """``paper_id`` and the rank columns of every paper from a catalog connection; None when the catalog has
    no ``paper_ranks`` (a snapshot published before it existed)."""
    import duckdb

    try:
        return con.sql("SELECT paper_id, citation_count, pagerank, weight FROM paper_ranks").to_arrow_table()
    except duckdb.CatalogException:
        return None


def align(paper_ids: list[str], ranks: pa.Table | None) -> dict[str, pa.Array]:
    """The rank columns in the order of ``paper_ids`` (nulls for papers ``ranks`` lacks, or all nulls)."""
    n = len(paper_ids)
    if ranks is None or ranks.num_rows == 0:
        return {c: pa.nulls(n, typ) for c, typ in RANK_COLUMNS.items()}
    pos = {p: i for i, p in enumerate(ranks["paper_id"].to_pylist())}
    idx = pa.array([pos.get(p) for p in paper_ids], pa.int64())
    return {c: ranks[c].cast(typ).take(idx).combine_chunks() for c, typ in RANK_COLUMNS.items()}


def nan_to_none(value):
    return None if isinstance(value, float) and np.isnan(value) else value
