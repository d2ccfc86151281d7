"""Reading citations by the work cited: the snapshot's ``cited_by`` table.

``cited_by`` holds the rows of ``citations`` again, each partition sorted by ``cited_work_id`` in small row groups
(:data:`pipeline.steps.catalog.REORDERED`), so that "which papers cite this work" reads one row group of each file
instead of the cited column of every citation. A query names it as ``{cited_by}``; in a snapshot published before it
existed the query reads ``citations`` (the same rows).
"""

from __future__ import annotations

from typing import Any

TABLE = "cited_by"
PLACEHOLDER = "{cited_by}"


def sql(text: str, table: str = TABLE) -> str:
    """``text`` with :data:`PLACEHOLDER` naming ``table``."""
    return text.replace(PLACEHOLDER, table)


def execute(con, text: str, params: list[Any] | None = None):
    """``con.execute`` of ``text`` reading ``cited_by`` where it names :data:`PLACEHOLDER`, else ``citations`` (a
    snapshot without ``cited_by``)."""
    import duckdb

    try:
        return con.execute(sql(text), params)
    except duckdb.CatalogException as exc:
        if PLACEHOLDER not in text or TABLE not in str(exc):
            raise
        return con.execute(sql(text, "citations"), params)
