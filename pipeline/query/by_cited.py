"""Reading edges by the work cited: the snapshot's ``cited_by`` and ``reference_links_by_cited`` tables.

Each holds the rows of a table the catalog cuts by the citing side again (``citations``, ``reference_links``), each
partition sorted by ``cited_work_id`` in small row groups (:data:`pipeline.steps.catalog.REORDERED`), so that "which
papers cite this work" and "how do the reference lists print it" read about one row group of each file instead of
the cited column of every row. A query names them by the placeholders of :data:`TABLES`; in a snapshot published
before they existed the query reads the tables they copy (the same rows).
"""

from __future__ import annotations

from typing import Any

# placeholder -> (the table sorted by the work cited, the table it copies)
TABLES = {"{cited_by}": ("cited_by", "citations"),
          "{reference_links_by_cited}": ("reference_links_by_cited", "reference_links")}
PLACEHOLDER = "{cited_by}"


def sql(text: str, copies: bool = True) -> str:
    """``text`` with each placeholder of :data:`TABLES` naming its table sorted by the work cited (``copies``), else
    the table it copies."""
    for placeholder, (by_cited, source) in TABLES.items():
        text = text.replace(placeholder, by_cited if copies else source)
    return text


def execute(con, text: str, params: list[Any] | None = None):
    """``con.execute`` of ``text`` reading the tables sorted by the work cited where it names their placeholders (a
    snapshot without them: the tables they copy)."""
    import duckdb

    try:
        return con.execute(sql(text), params)
    except duckdb.CatalogException as exc:
        if not any(p in text and t in str(exc) for p, (t, _) in TABLES.items()):
            raise
        return con.execute(sql(text, copies=False), params)
