"""Full-text (BM25) queries on a snapshot table, on the calling thread's own event loop.

LanceDB's synchronous API hands every query to one shared background event-loop thread and waits
for it. Measured on the CISI snapshot, that hand-off is ~1.3 ms of CPU of a ~5 ms full-text query
(and, in a server, GIL ping-pong between the searching threads and that loop thread). Here each
searching thread drives LanceDB's own async API on a private event loop instead: the same query,
the same index and scores, without the hand-off.

Inside an already running event loop (a notebook, an async app calling the searcher directly) a
private loop cannot run, so the query goes through the synchronous table as before.
"""

from __future__ import annotations

import asyncio
import threading

import pyarrow as pa


def match(text: str, column: str = "text", boost: float = 1.0):
    """LanceDB's ``MatchQuery(text, column, boost=...)``: any term of ``text`` (OR), exact, no fuzziness."""
    from pipeline.query.snapshot import import_lancedb

    import_lancedb()  # whole, by one thread at a time, before a name is taken from it
    from lancedb.query import MatchQuery

    # MatchQuery is a pydantic dataclass whose options are Field(default, kw_only=True): mypy reads
    # those fields as required, pydantic gives them their defaults
    return MatchQuery(text, column, boost=boost)  # type: ignore[call-arg]


class FullText:
    """BM25 queries against one LanceDB table (``uri`` + ``name``; ``sync_table``: the table, or a function
    returning it, for the fallback)."""

    def __init__(self, uri: str, name: str, sync_table):
        self._uri, self._name, self._sync = uri, name, sync_table
        self._local = threading.local()

    def _handle(self):
        h = getattr(self._local, "handle", None)
        if h is None:
            from pipeline.query.snapshot import import_lancedb

            loop = asyncio.new_event_loop()
            db = loop.run_until_complete(import_lancedb().connect_async(self._uri))
            h = self._local.handle = (loop, loop.run_until_complete(db.open_table(self._name)))
        return h

    def query(self, query, columns: list[str], limit: int, where: str | None = None) -> pa.Table:
        """Rows matching ``query`` (text or a LanceDB FullTextQuery), best first, with ``_rowid``.

        ``where`` filters before scoring (prefilter), as ``search(...).where(where, prefilter=True)``.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop running in this thread: use our own
            loop, table = self._handle()
            q = table.query().nearest_to_text(query).select(columns).with_row_id().limit(limit)
            if where:
                q = q.where(where)
            return loop.run_until_complete(q.to_arrow())
        table = self._sync() if callable(self._sync) else self._sync
        q = table.search(query, query_type="fts")
        if where:
            q = q.where(where, prefilter=True)
        return q.select(columns).with_row_id(True).limit(limit).to_arrow()
