"""Stage 1 of a search: candidate passages, as arrays.

A :class:`Pool` gathers the candidate passages of one search -- the original query's and every
sub-query's -- once each, as columns (chunk id, paper id, text, section, page, LanceDB row id,
vector) aligned by *pool row*, first seen first. Every list a query produces is an array of pool
rows with an array of scores beside it:

- sparse: the BM25 candidates and their raw scores;
- dense: the nearest chunk vectors and their dot product with the query vector;
- fused (:func:`pipeline.query.fusion.fuse`): one list and a fused score in [0, 1].

:class:`Ranked` keeps one query's fused list and its sparse list's BM25 over its best;
:meth:`Ranked.over` lays either over the candidate rows (0 where a row is absent), which is how the
signals (:mod:`pipeline.query.signals`) read them. :meth:`Pool.take` hands the candidates on as
:class:`Passages`, the columns the scoring stage works on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from pipeline.query.fusion import normalise_max
from pipeline.query.resident import FlatChunks


@dataclass
class Passages:
    """Candidate passages as columns, aligned by position (``rowids``: -1 where LanceDB gave none)."""

    chunk_ids: list[str]
    paper_ids: list[str]
    texts: list[str]
    sections: list[Any]
    pages: list[Any]
    rowids: np.ndarray
    roles: list[Any]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.chunk_ids)


@dataclass
class Ranked:
    """One query's candidates: the fused list (pool rows best first, fused scores) and the sparse
    list's BM25 over its best (its pool rows, their scores)."""

    rows: np.ndarray
    fused: np.ndarray
    sparse_rows: np.ndarray
    bm25: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray, fused: np.ndarray, sparse_rows: np.ndarray, sparse_scores: np.ndarray) -> Ranked:
        return cls(np.asarray(rows, dtype=np.int64), np.asarray(fused, dtype=np.float64),
                   np.asarray(sparse_rows, dtype=np.int64), normalise_max(sparse_scores))

    def over(self, which: str, rows: np.ndarray, n_pool: int) -> np.ndarray:
        """``fused`` or ``bm25`` of pool ``rows`` (0 where the list does not hold the row)."""
        at, values = (self.rows, self.fused) if which == "fused" else (self.sparse_rows, self.bm25)
        full = np.zeros(n_pool, dtype=np.float64)
        full[at] = values
        return full[rows]


class Pool:
    """The candidate passages of one search, one row each, first seen first."""

    def __init__(self, dim: int):
        self.dim = dim
        self.row_of: dict[str, int] = {}
        self.chunk_ids: list[str] = []
        self.paper_ids: list[str] = []
        self.texts: list[str] = []
        self.sections: list[Any] = []
        self.pages: list[Any] = []
        self.roles: list[Any] = []
        self._rowids: list[int] = []
        self._blocks: list[np.ndarray] = []
        self._vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def _add(self, chunk_ids: Sequence[str], paper_ids: Sequence[str], texts: Sequence[str | None],
             sections: Sequence[Any], pages: Sequence[Any], rowids: Sequence[int | None],
             vectors: np.ndarray, roles: Sequence[Any]) -> np.ndarray:
        """Pool rows of these passages; the ones not in the pool yet are added (first seen kept)."""
        rows = np.empty(len(chunk_ids), dtype=np.int64)
        new: list[int] = []
        for i, cid in enumerate(chunk_ids):
            r = self.row_of.get(cid)
            if r is None:
                r = self.row_of[cid] = len(self.chunk_ids)
                self.chunk_ids.append(cid)
                self.paper_ids.append(paper_ids[i])
                self.texts.append(texts[i] or "")
                self.sections.append(sections[i])
                self.pages.append(pages[i])
                self.roles.append(roles[i])
                rid = rowids[i]
                self._rowids.append(-1 if rid is None else int(rid))
                new.append(i)
            rows[i] = r
        if new:
            self._blocks.append(np.asarray(vectors, dtype=np.float32)[new])
            self._vectors = None
        return rows

    def add_table(self, t: pa.Table, vectors: np.ndarray) -> np.ndarray:
        """Pool rows of a LanceDB result (``chunk_id``, ``paper_id``, ``text`` and, where present,
        ``section``, ``page_start``, ``role``, ``_rowid``) whose vectors are ``vectors``."""
        if t.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        none = [None] * t.num_rows

        def col(name: str) -> list:
            return t[name].to_pylist() if name in t.column_names else none

        return self._add(col("chunk_id"), col("paper_id"), col("text"), col("section"), col("page_start"),
                         col("_rowid"), vectors, col("role"))

    def add_positions(self, flat: FlatChunks, positions: np.ndarray) -> np.ndarray:
        """Pool rows of the resident table's passages at ``positions``."""
        pos = np.asarray(positions, dtype=np.int64).tolist()
        cols = flat.lists
        none = [None] * len(flat.rowids)
        sections, pages, roles = cols.get("section", none), cols.get("page_start", none), cols.get("role", none)
        return self._add([cols["chunk_id"][p] for p in pos], [cols["paper_id"][p] for p in pos],
                         [cols["text"][p] for p in pos], [sections[p] for p in pos], [pages[p] for p in pos],
                         flat.rowids[pos].tolist(), flat.vectors[pos], [roles[p] for p in pos])

    @property
    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            self._vectors = (np.vstack(self._blocks) if self._blocks
                             else np.zeros((0, self.dim), dtype=np.float32))
        return self._vectors

    def take(self, rows: np.ndarray) -> Passages:
        idx = np.asarray(rows, dtype=np.int64).tolist()
        return Passages(chunk_ids=[self.chunk_ids[r] for r in idx], paper_ids=[self.paper_ids[r] for r in idx],
                        texts=[self.texts[r] for r in idx], sections=[self.sections[r] for r in idx],
                        pages=[self.pages[r] for r in idx], roles=[self.roles[r] for r in idx],
                        rowids=np.asarray([self._rowids[r] for r in idx], dtype=np.int64),
                        vectors=self.vectors[idx] if idx else np.zeros((0, self.dim), dtype=np.float32))
