"""A snapshot's Lance tables read with Lance itself (pylance), without LanceDB.

The searcher reads whole columns once (metadata, resident vectors, passage text), counts rows, takes rows
by id and lists indexes: none of it needs LanceDB, whose import alone costs ~1.1 s here (almost all of it
the pydantic models of ``lance_namespace_urllib3_client``), against ~0.25 s for ``import lance``
(BENCHMARKS.md, "One-shot CLI search"). LanceDB is still what answers full-text and ANN vector queries
(:mod:`pipeline.query.fts`, ``Searcher.dense`` on indexed tables): :attr:`ReadTable.lancedb` opens the same
table there, imported only when such a query runs. Both read the same files, so row ids (``_rowid``)
agree between them.

Without pylance installed, every read goes through LanceDB as before.
"""

from __future__ import annotations

import importlib.util
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa

ROWID = "_rowid"


def have_pylance() -> bool:
    return importlib.util.find_spec("lance") is not None


class ReadTable:
    """Read-only access to the Lance table ``name`` of a LanceDB folder (``<folder>/<name>.lance``).

    ``open_lancedb``: returns the same table opened with LanceDB (for searches, and for reads when pylance
    is missing)."""

    def __init__(self, folder: Path, name: str, open_lancedb: Callable[[], Any]):
        self.name, self.uri, self._open_lancedb = name, Path(folder) / f"{name}.lance", open_lancedb

    @cached_property
    def lancedb(self):
        """The table opened with LanceDB (imports it)."""
        return self._open_lancedb()

    @cached_property
    def _ds(self):
        if not have_pylance():
            return None
        import lance

        return lance.dataset(str(self.uri))

    @property
    def schema(self) -> pa.Schema:
        return self._ds.schema if self._ds is not None else self.lancedb.schema

    def count_rows(self) -> int:
        return int(self._ds.count_rows() if self._ds is not None else self.lancedb.count_rows())

    def scan(self, columns: Sequence[str]) -> pa.Table:
        """Every row of ``columns``, with ``_rowid`` last, in storage order."""
        if self._ds is not None:
            return self._ds.to_table(columns=list(columns), with_row_id=True)
        t = self.lancedb
        return t.search().select(list(columns)).with_row_id(True).limit(max(t.count_rows(), 1)).to_arrow()

    def fragments(self) -> list[tuple[int, int, int]] | None:
        """``(id, physical rows, deleted rows)`` of each data fragment, when pylance reads the table and its row ids
        are row addresses (fragment id in the high 32 bits: no stable row ids); else None."""
        if self._ds is None:
            return None
        out = []
        for f in self._ds.get_fragments():
            m = f.metadata
            if m.row_id_meta is not None:
                return None
            out.append((int(f.fragment_id), int(f.physical_rows), int(m.num_deletions)))
        return out

    def scan_fragments(self, ids: Sequence[int], columns: Sequence[str]) -> pa.Table:
        """Every live row of the fragments ``ids`` (see :meth:`fragments`: pylance only), ``columns`` and ``_rowid``."""
        wanted = set(ids)
        frags = [f for f in self._ds.get_fragments() if f.fragment_id in wanted]
        return self._ds.scanner(columns=list(columns), with_row_id=True, fragments=frags).to_table()

    def take_offsets(self, offsets: Sequence[int], columns: Sequence[str]) -> pa.Table:
        """The rows at these positions (0 .. count_rows - 1), in that order."""
        if self._ds is not None:
            return self._ds.take(list(offsets), columns=list(columns))
        return self.lancedb.take_offsets(list(offsets)).select(list(columns)).to_arrow()

    def take_row_ids(self, row_ids: Sequence[int], columns: Sequence[str]) -> pa.Table:
        """The rows with these ``_rowid`` values (the order of the answer is not promised: callers key by id)."""
        if self._ds is not None:
            # LanceDB's take_row_ids is this same call in its own copy of Lance (pylance marks the method
            # unstable: a pylance without it falls back to LanceDB)
            take_rows = getattr(self._ds, "_take_rows", None)
            if take_rows is not None:
                return take_rows(list(row_ids), columns=list(columns))
        return self.lancedb.take_row_ids(list(row_ids)).select(list(columns)).to_arrow()

    def has_vector_index(self) -> bool:
        """Whether a column named ``vector`` has an index (only vector indexes go on vector columns)."""
        if self._ds is not None:
            return any("vector" in (d.field_names or []) for d in self._ds.describe_indices())
        return any("vector" in (ix.columns or []) and ix.index_type != "FTS" for ix in self.lancedb.list_indices())
