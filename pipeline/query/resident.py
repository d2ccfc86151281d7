"""Snapshot vectors held in memory for the search hot path.

Measured on this machine (BENCHMARKS.md, "Query speed" and "HTTP serve"): every LanceDB call costs
a fixed ~1.5-8 ms of CPU however small the table, and a paper-vector ``take`` over a large snapshot
reads cold pages (the p95 tail). A snapshot is immutable, so the searcher may read a few columns
once and answer from memory:

- :class:`PaperVectors`: the papers' ``doc_vector`` / ``abs_vector`` by paper row (meta order);
- :class:`FigureVectors`: the figure legend vectors, grouped by paper;
- :class:`FlatChunks`: the chunks' vectors and display columns, searched exactly with numpy. Used
  only where LanceDB itself would scan every vector (the table has no ANN index), with the same
  metric (squared L2 on the stored vectors), so results are the same; tables with an ANN index keep
  LanceDB's index.

Each loads only when it fits the remaining byte budget (``query_resident_mb``); otherwise the
searcher keeps reading from LanceDB per query.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)


class Budget:
    """Bytes the resident arrays may still take."""

    def __init__(self, mb: float):
        self.left = int(mb * 1024 * 1024)

    def take(self, nbytes: int, what: str) -> bool:
        if self.left <= 0 or nbytes > self.left:
            log.info("%s would take %.0f MB of memory, more than query_resident_mb leaves (%.0f MB): read per query",
                     what, nbytes / 2**20, self.left / 2**20)
            return False
        self.left -= nbytes
        return True


def vector_matrix(col: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    """(n, dim) float32 from a fixed-size-list column; null vectors become zero rows."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    out = np.zeros((len(arr), dim), dtype=np.float32)
    if len(arr) == 0:
        return out
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if valid.any():
        vals = arr.filter(arr.is_valid()).flatten().to_numpy(zero_copy_only=False)
        out[valid] = np.asarray(vals, dtype=np.float32).reshape(-1, dim)
    return out


def scan(table, columns: list[str]) -> pa.Table:
    """All rows of a few columns plus ``_rowid`` (for ``take_row_ids`` later) of a
    :class:`pipeline.query.tables.ReadTable`."""
    return table.scan(columns)


class PaperVectors:
    """doc and abstract vectors of every paper, row i = the searcher's paper row i."""

    def __init__(self, doc: np.ndarray, abs_: np.ndarray):
        self.doc, self.abs = doc, abs_

    @classmethod
    def load(cls, papers, paper_row: dict[str, int], dim: int, budget: Budget) -> PaperVectors | None:
        n = len(paper_row)
        if not budget.take(2 * n * dim * 4, "the papers' vectors"):
            return None
        t = scan(papers, ["paper_id", "doc_vector", "abs_vector"])
        rows = np.array([paper_row[p] for p in t["paper_id"].to_pylist()], dtype=np.int64)
        doc = np.zeros((n, dim), dtype=np.float32)
        abs_ = np.zeros((n, dim), dtype=np.float32)
        doc[rows] = vector_matrix(t["doc_vector"], dim)
        abs_[rows] = vector_matrix(t["abs_vector"], dim)
        return cls(doc, abs_)

    def get(self, rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return self.doc[rows], self.abs[rows]


class FigureVectors:
    """Every figure legend vector, and each paper's rows in that matrix."""

    def __init__(self, vectors: np.ndarray, by_paper: dict[str, list[int]]):
        self.vectors, self.by_paper = vectors, by_paper

    @classmethod
    def load(cls, figures, dim: int, budget: Budget) -> FigureVectors | None:
        if not budget.take(figures.count_rows() * dim * 4, "the figure legends' vectors"):
            return None
        t = scan(figures, ["paper_id", "vector"])
        by_paper: dict[str, list[int]] = {}
        for i, pid in enumerate(t["paper_id"].to_pylist()):
            by_paper.setdefault(pid, []).append(i)
        return cls(vector_matrix(t["vector"], dim), by_paper)

    def get(self, paper_ids: list[str], local: dict[str, int]) -> tuple[np.ndarray | None, np.ndarray | None]:
        idx = [(i, local[p]) for p in paper_ids for i in self.by_paper.get(p, ())]
        if not idx:
            return None, None
        rows, owners = zip(*idx)
        return self.vectors[list(rows)], np.asarray(owners, dtype=np.int64)


class FlatChunks:
    """Exact nearest chunks by squared L2 (LanceDB's default metric without an index), in memory."""

    def __init__(self, rows: pa.Table, vectors: np.ndarray):
        rowids = rows["_rowid"].to_numpy()
        if len(rowids) > 1 and not (rowids[1:] > rowids[:-1]).all():  # positions() looks row ids up by bisection
            order = np.argsort(rowids, kind="stable")
            rows, vectors = rows.take(pa.array(order)), vectors[order]
        self.rows = rows  # display columns + _rowid, without the vectors (a scan reads them in row id order)
        self.vectors = np.ascontiguousarray(vectors)
        self.rowids = self.rows["_rowid"].to_numpy()
        self.sq_norms = np.einsum("ij,ij->i", vectors, vectors)
        codes = rows["paper_id"].combine_chunks().dictionary_encode()
        self.paper_code = np.asarray(codes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        self.code_of = {p: i for i, p in enumerate(codes.dictionary.to_pylist())}
        # the display columns as Python lists by position: a candidate's fields are list look-ups, not an
        # Arrow take and a conversion per search
        self.lists = {c: self.rows[c].to_pylist() for c in self.rows.column_names if c != "_rowid"}

    @staticmethod
    def has_ann_index(chunks) -> bool:
        try:
            return bool(chunks.has_vector_index())
        except Exception as exc:  # an older table format without index listing: leave it to LanceDB
            log.debug("could not list the chunks' indexes: %s", exc)
            return True

    @classmethod
    def load(cls, chunks, columns: list[str], dim: int, budget: Budget) -> FlatChunks | None:
        if cls.has_ann_index(chunks):
            return None
        n = chunks.count_rows()
        if not budget.take(n * (dim * 4 + 600), "the chunks' vectors and text"):  # ~600 B of text/ids per chunk
            return None
        t = scan(chunks, columns)
        vectors = vector_matrix(t["vector"], dim)
        return cls(t.drop_columns(["vector"]), vectors)

    def allowed_mask(self, allowed: set[str]) -> np.ndarray:
        """Which rows (positions) belong to the papers ``allowed``."""
        codes = [self.code_of[p] for p in allowed if p in self.code_of]
        return np.isin(self.paper_code, codes)

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        """Positions (in :attr:`rows`, :attr:`vectors`, :attr:`lists`) of the chunks with these row ids."""
        return np.searchsorted(self.rowids, rowids)

    def search(self, vec: np.ndarray, k: int, allowed: set[str] | None = None) -> tuple[pa.Table, np.ndarray]:
        """The ``k`` nearest chunks (allowed papers only), nearest first, with ``_distance``; and their vectors."""
        top, dist = self.nearest(vec, k, allowed)
        if not len(top):
            return pa.table({}), np.zeros((0, self.vectors.shape[1]), dtype=np.float32)
        out = self.rows.take(pa.array(top))
        return out.append_column("_distance", pa.array(dist)), self.vectors[top]

    def nearest(self, vec: np.ndarray, k: int, allowed: set[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the ``k`` nearest chunks (allowed papers only), nearest first, and their distances."""
        v = np.asarray(vec, dtype=np.float32)
        dist = self.sq_norms - 2.0 * (self.vectors @ v) + float(v @ v)
        if allowed is not None:
            dist = np.where(self.allowed_mask(allowed), dist, np.inf)
        k = min(k, int(np.isfinite(dist).sum()))
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        top = np.argpartition(dist, k - 1)[:k]
        top = top[np.lexsort((top, dist[top]))]  # nearest first; ties by row order
        return top, dist[top]
