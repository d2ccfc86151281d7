"""One read-only DuckDB connection per served snapshot's catalog, a cursor per tool call.

Opening ``catalog.duckdb`` costs more than most catalog queries a tool runs (paper cards, passages,
citation lists), so the server keeps the connection of the snapshot it serves, and of the one before it
while calls on it finish, and hands each call a cursor of its own (DuckDB cursors are safe to use from
one thread each), as ``paperkb serve`` does.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

KEEP = 2  # the snapshot served and the one before it


class Catalogs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Any] = {}  # snapshot id -> connection, oldest first

    @contextmanager
    def cursor(self, snapshot) -> Iterator[Any]:
        """A cursor on ``snapshot``'s catalog (a :class:`pipeline.query.snapshot.Snapshot`), closed after the block."""
        with self._lock:
            con = self._open.get(snapshot.snapshot_id)
            if con is None:
                con = self._open[snapshot.snapshot_id] = snapshot.catalog()
                for old in list(self._open)[:-KEEP]:
                    self._open.pop(old).close()
            cursor = con.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def close(self) -> None:
        with self._lock:
            for con in self._open.values():
                con.close()
            self._open.clear()
